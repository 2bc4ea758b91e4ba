// Package n8n talks to n8n's public API: it looks executions up for the
// claim's lineage and reconciles failed executions that never reached the
// error intake. The folder also holds the workflows users import into n8n.
package n8n

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
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
// implements audit.ExecutionLookup. Every answer is read with a cap (see
// call.go), every listing stops where no n8n's would go on (pager), and no
// redirect takes the key to another address (CheckRedirect).
type Client struct {
	api     caller
	metrics *metrics.Metrics
	// Timeout bounds one lookup; a claim waits at most this long for n8n.
	Timeout time.Duration
	// Log receives one WARN line when n8n's API starts failing and one
	// INFO line when it answers again (nil: nothing is logged).
	Log *slog.Logger

	health health
	group  singleflight.Group
	mu     sync.Mutex
	cache  map[string]cached
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
	return &Client{api: newCaller(baseURL, apiKey), metrics: m, Timeout: 2 * time.Second, cache: map[string]cached{}}
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
	if err := c.health.shortCircuit(); err != nil {
		return audit.N8NExecution{}, err
	}
	ch := c.group.DoChan(id, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.Timeout)
		defer cancel()
		var e execution
		_, err := c.get(ctx, "/executions/"+url.PathEscape(id), nil, maxExecution, &e)
		c.observe(ctx, err, false)
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

// FailedExecutions returns one page of executions with status error, in
// n8n's order (newest id first), and the cursor of the next page ("" on the
// last).
func (c *Client) FailedExecutions(ctx context.Context, cursor string, limit int) ([]Failed, string, error) {
	list, next, _, err := c.failedPage(ctx, cursor, limit)
	c.observe(ctx, err, true)
	return list, next, err
}

// failedPage is FailedExecutions with the page's size in bytes.
func (c *Client) failedPage(ctx context.Context, cursor string, limit int) ([]Failed, string, int, error) {
	q := url.Values{"status": {"error"}, "limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var page struct {
		Data       []execution `json:"data"`
		NextCursor *string     `json:"nextCursor"`
	}
	size, err := c.get(ctx, "/executions", q, maxAnswer, &page)
	if errors.Is(err, audit.ErrExecutionNotFound) {
		err = fail(stateFailing, errors.New("n8n API answered 404 to GET /executions: is the URL n8n's public API, ending in /api/v1?"))
	}
	if err != nil {
		return nil, "", size, err
	}
	out := make([]Failed, 0, len(page.Data))
	for _, e := range page.Data {
		out = append(out, failed(e))
	}
	next := ""
	if page.NextCursor != nil {
		next = *page.NextCursor
	}
	return out, next, size, nil
}

// FailedExecution returns one execution with its stored error. One whose
// data is larger than maxWithData is not read: n8n answered, with an
// execution too large to keep in memory.
func (c *Client) FailedExecution(ctx context.Context, id string) (Failed, error) {
	var e execution
	_, err := c.get(ctx, "/executions/"+url.PathEscape(id), url.Values{"includeData": {"true"}}, maxWithData, &e)
	if errors.Is(err, ErrTooLarge) {
		c.observe(ctx, nil, false)
		return failed(e), fmt.Errorf("n8n: execution %s with its data: %w", id, errors.Unwrap(err))
	}
	c.observe(ctx, err, false)
	return failed(e), err
}

// Check calls the API once: it answers and accepts the key.
func (c *Client) Check(ctx context.Context) error {
	_, _, err := c.FailedExecutions(ctx, "", 1)
	return err
}

// get calls the API and decodes its JSON answer of at most limit bytes;
// it returns the answer's size. The error never holds the key; a failure
// of n8n's API is one of its states (health.go), which the caller tells
// the client's health (observe).
func (c *Client) get(ctx context.Context, path string, q url.Values, limit int64, dst any) (size int, err error) {
	start := time.Now()
	result := "ok"
	defer func() { c.metrics.LookedUp(result, time.Since(start)) }()
	a, err := c.api.call(ctx, http.MethodGet, path, q, nil, limit)
	if err != nil {
		result = "error"
		err = classify(ctx, err)
		var f *apiFailure
		if errors.As(err, &f) && (f.state == stateSlow || f.state == stateUnreachable) {
			result = map[string]string{stateSlow: "timeout", stateUnreachable: "unreachable"}[f.state]
		}
		return 0, err
	}
	switch {
	case a.status == http.StatusNotFound:
		result = "not_found"
		return 0, audit.ErrExecutionNotFound
	case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
		result = "unauthorized"
		return 0, fail(stateRefused, fmt.Errorf("%w (%d)", ErrUnauthorized, a.status))
	case a.status != http.StatusOK:
		result = "error"
		return 0, fail(stateFailing, fmt.Errorf("n8n API answered %d", a.status))
	}
	body := a.body
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
		return len(a.body), fail(stateStrange, fmt.Errorf("n8n API: answer is not what n8n sends: %w", err))
	}
	return len(a.body), nil
}

// observe tells the client's health how a call went; listing says it was
// a whole listing, which alone can tell that listings end again.
func (c *Client) observe(ctx context.Context, err error, listing bool) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.health.observe(ctx, log, c.api.redacted(), err, listing)
}

// classify says which failure of n8n's API a transport error is.
func classify(ctx context.Context, err error) error {
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err // without "Get <url>:"
	}
	var ne net.Error
	switch {
	case errors.Is(err, ErrRedirectRefused):
		return fail(stateRedirected, fmt.Errorf("n8n API: %w", inner))
	case errors.Is(err, ErrTooLarge):
		return fail(stateStrange, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()):
		return fail(stateSlow, errors.New("n8n API did not answer in time"))
	case errors.Is(err, context.Canceled):
		return err
	}
	return fail(stateUnreachable, fmt.Errorf("n8n API unreachable: %w", inner))
}
