// Package n8n talks to n8n's public API: it looks executions up for the
// claim's lineage and reconciles failed executions that never reached the
// error intake. The folder also holds the workflows users import into n8n.
package n8n

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/metrics"
)

// ErrUnauthorized is returned when n8n refuses the API key.
var ErrUnauthorized = errors.New("n8n refused the API key")

// Client calls n8n's public API (RETRYAUDIT_N8N_API_URL, e.g.
// http://127.0.0.1:5678/api/v1) with the header X-N8N-API-KEY. It
// implements audit.ExecutionLookup.
type Client struct {
	base    string
	key     string
	http    *http.Client
	metrics *metrics.Metrics
	// Timeout bounds one lookup; a claim waits at most this long for n8n.
	Timeout time.Duration

	group singleflight.Group
	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	x       audit.N8NExecution
	err     error
	expires time.Time
}

// cacheFor is how long an answer is reused: the concurrent claims of one
// burst share it, but an execution's identity is asked again after it (its
// id may name another execution once n8n is restored from a backup).
const cacheFor = 10 * time.Second

// maxCached bounds the lookup cache; past it the cache starts over.
const maxCached = 10000

// New returns a client of the API at baseURL.
func New(baseURL, apiKey string, m *metrics.Metrics) *Client {
	return &Client{
		base: strings.TrimRight(baseURL, "/"), key: apiKey, metrics: m,
		http:    &http.Client{Timeout: 30 * time.Second},
		Timeout: 2 * time.Second,
		cache:   map[string]cached{},
	}
}

// execution is an execution as n8n's API returns it. Ids may be strings or
// numbers; retryOf is null, not absent, when there is none.
type execution struct {
	ID         flexID    `json:"id"`
	WorkflowID flexID    `json:"workflowId"`
	Mode       string    `json:"mode"`
	Status     string    `json:"status"`
	RetryOf    flexID    `json:"retryOf"`
	StartedAt  time.Time `json:"startedAt"`
	StoppedAt  time.Time `json:"stoppedAt"`
	Data       *struct {
		ResultData struct {
			LastNodeExecuted string `json:"lastNodeExecuted"`
			Error            *struct {
				Message     string `json:"message"`
				Description string `json:"description"`
				Node        *struct {
					Name string `json:"name"`
				} `json:"node"`
			} `json:"error"`
		} `json:"resultData"`
	} `json:"data"`
}

func (e execution) public() audit.N8NExecution {
	return audit.N8NExecution{ID: string(e.ID), WorkflowID: string(e.WorkflowID), Mode: e.Mode, Status: e.Status,
		RetryOf: string(e.RetryOf), StartedAt: e.StartedAt, StoppedAt: e.StoppedAt}
}

// flexID reads a JSON string or number; null is "".
type flexID string

// UnmarshalJSON reads a string, a number or null.
func (f *flexID) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		*f = ""
	case strings.HasPrefix(s, `"`):
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*f = flexID(v)
	default:
		*f = flexID(s)
	}
	return nil
}

// Execution looks one execution up: once per id (concurrent lookups share
// one call), with a short timeout, and from the cache for a few seconds
// after it was seen.
func (c *Client) Execution(ctx context.Context, id string) (audit.N8NExecution, error) {
	c.mu.Lock()
	hit, ok := c.cache[id]
	c.mu.Unlock()
	if ok && time.Now().Before(hit.expires) {
		return hit.x, hit.err
	}
	ch := c.group.DoChan(id, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.Timeout)
		defer cancel()
		var e execution
		err := c.get(ctx, "/executions/"+url.PathEscape(id), nil, &e)
		x := e.public()
		switch {
		case err == nil:
			c.remember(id, cached{x: x, expires: time.Now().Add(cacheFor)})
		case errors.Is(err, audit.ErrExecutionNotFound):
			c.remember(id, cached{err: err, expires: time.Now().Add(time.Minute)})
		}
		return x, err
	})
	select {
	case r := <-ch:
		x, _ := r.Val.(audit.N8NExecution)
		return x, r.Err
	case <-ctx.Done():
		return audit.N8NExecution{}, ctx.Err()
	}
}

func (c *Client) remember(id string, v cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cache) >= maxCached {
		c.cache = map[string]cached{}
	}
	c.cache[id] = v
}

// Failed is a failed execution found by FailedExecutions, with what its
// stored data says about the error.
type Failed struct {
	audit.N8NExecution
	Node    string
	Message string
}

// FailedExecutions returns one page of executions with status error, in
// n8n's order (newest id first), and the cursor of the next page ("" on the
// last).
func (c *Client) FailedExecutions(ctx context.Context, cursor string, limit int) ([]Failed, string, error) {
	q := url.Values{"status": {"error"}, "limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var page struct {
		Data       []execution `json:"data"`
		NextCursor *string     `json:"nextCursor"`
	}
	if err := c.get(ctx, "/executions", q, &page); err != nil {
		return nil, "", err
	}
	out := make([]Failed, 0, len(page.Data))
	for _, e := range page.Data {
		out = append(out, failed(e))
	}
	next := ""
	if page.NextCursor != nil {
		next = *page.NextCursor
	}
	return out, next, nil
}

// FailedExecution returns one execution with its stored error.
func (c *Client) FailedExecution(ctx context.Context, id string) (Failed, error) {
	var e execution
	err := c.get(ctx, "/executions/"+url.PathEscape(id), url.Values{"includeData": {"true"}}, &e)
	return failed(e), err
}

func failed(e execution) Failed {
	f := Failed{N8NExecution: e.public()}
	if e.Data != nil {
		f.Node = e.Data.ResultData.LastNodeExecuted
		if er := e.Data.ResultData.Error; er != nil {
			// As the intake does: n8n's HTTP node keeps what the server
			// said in the description.
			f.Message = cmp.Or(er.Message, er.Description)
			if er.Description != "" && er.Description != f.Message {
				f.Message += ": " + er.Description
			}
			if er.Node != nil && er.Node.Name != "" {
				f.Node = er.Node.Name
			}
		}
	}
	return f
}

// Check calls the API once: it answers and accepts the key.
func (c *Client) Check(ctx context.Context) error {
	_, _, err := c.FailedExecutions(ctx, "", 1)
	return err
}

// get calls the API and decodes its JSON answer. The error never holds
// the key.
func (c *Client) get(ctx context.Context, path string, q url.Values, dst any) error {
	start := time.Now()
	result := "ok"
	defer func() { c.metrics.LookedUp(result, time.Since(start)) }()
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		result = "error"
		return fmt.Errorf("n8n: %w", err)
	}
	req.Header.Set("X-N8N-API-KEY", c.key)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		result = "unreachable"
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			result = "timeout"
			return fmt.Errorf("n8n API did not answer within %s", c.Timeout)
		}
		return fmt.Errorf("n8n API unreachable: %w", errors.Unwrap(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		result = "not_found"
		return audit.ErrExecutionNotFound
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		result = "unauthorized"
		return fmt.Errorf("%w (%d)", ErrUnauthorized, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		result = "error"
		return fmt.Errorf("n8n API answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		result = "error"
		return fmt.Errorf("n8n API: read answer: %w", err)
	}
	// The internal REST API wraps its answers in {"data": …}; the public
	// API returns the execution itself.
	var wrapped struct {
		Data json.RawMessage `json:"data"`
		ID   json.RawMessage `json:"id"`
	}
	if path != "/executions" && json.Unmarshal(body, &wrapped) == nil && wrapped.ID == nil && len(wrapped.Data) > 0 &&
		wrapped.Data[0] == '{' {
		body = wrapped.Data
	}
	if err := json.Unmarshal(body, dst); err != nil {
		result = "error"
		return fmt.Errorf("n8n API: answer is not what n8n sends: %w", err)
	}
	return nil
}
