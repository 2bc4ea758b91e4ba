package n8n

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// RetryTimeout bounds one retry: n8n answers POST /executions/{id}/retry
// only after the retried execution has finished.
const RetryTimeout = 2 * time.Minute

// ExecutionNow asks n8n about one execution now, past the lookup cache: a
// retry is decided on what n8n says at that moment.
func (c *Client) ExecutionNow(ctx context.Context, id string) (audit.N8NExecution, error) {
	ctx, cancel := context.WithTimeout(ctx, max(c.Timeout, 5*time.Second))
	defer cancel()
	var e execution
	_, err := c.get(ctx, "/executions/"+url.PathEscape(id), nil, maxExecution, &e)
	c.observe(ctx, err, false)
	return e.public(), err
}

// Retry asks n8n to retry a failed execution with the workflow it ran
// ({"loadWorkflow": false}) and returns the new execution once it has
// finished. A pruned execution answers audit.ErrExecutionNotFound; one n8n
// will not retry (it did not fail), audit.ErrNotRetryable with n8n's words.
func (c *Client) Retry(ctx context.Context, id string) (audit.N8NExecution, error) {
	ctx, cancel := context.WithTimeout(ctx, RetryTimeout)
	defer cancel()
	slow := c.api
	slow.http = &http.Client{Timeout: RetryTimeout, CheckRedirect: CheckRedirect}
	a, err := slow.call(ctx, http.MethodPost, "/executions/"+url.PathEscape(id)+"/retry", nil,
		[]byte(`{"loadWorkflow":false}`), maxExecution)
	if err != nil {
		err = classify(ctx, err)
		c.observe(ctx, err, false)
		return audit.N8NExecution{}, err
	}
	switch {
	case a.status == http.StatusNotFound:
		return audit.N8NExecution{}, audit.ErrExecutionNotFound
	case a.status == http.StatusConflict || a.status == http.StatusBadRequest:
		return audit.N8NExecution{}, fmt.Errorf("%w: %s", audit.ErrNotRetryable, n8nMessage(a.body))
	case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
		return audit.N8NExecution{}, fail(stateRefused, fmt.Errorf("%w (%d)", ErrUnauthorized, a.status))
	case !a.ok():
		return audit.N8NExecution{}, fmt.Errorf("n8n API answered %d to the retry: %s", a.status, n8nMessage(a.body))
	}
	var e execution
	if err := json.Unmarshal(a.body, &e); err != nil {
		return audit.N8NExecution{}, errors.New("n8n API: the retry's answer is not what n8n sends")
	}
	return e.public(), nil
}

// n8nMessage is the message of n8n's error answer ({"message": …}), or
// its start.
func n8nMessage(body []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		return Printable(m.Message, 300)
	}
	return Printable(string(body), 300)
}
