package n8n

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Every request to n8n's API — the service's lookups and reconciliation,
// and every call of connect — goes through caller: its answer is read up to
// a cap that fits what n8n sends for that request, within a time limit, and
// it follows no redirect that would carry the key to another address.

const (
	// maxAnswer bounds an answer that holds neither execution data nor
	// workflows: a page of 250 executions (n8n 2.41.1 sends about 600
	// bytes an execution; custom data adds at most 10 × 255 characters,
	// so under 1 MiB a page), a page of credentials, /discover (about
	// 30 KiB), a credential written.
	maxAnswer = 4 << 20
	// maxExecution bounds the answer to a lookup on the claim path: one
	// execution without its data (under 4 KiB). Claims look up at once,
	// so it stays small.
	maxExecution = 256 << 10
	// maxWithData bounds one execution read with its data, for the error
	// of a failed one: a larger one is recorded with what the list says.
	maxWithData = 8 << 20
	// maxWorkflows bounds an answer holding workflows (one, or a page of
	// workflowsPage): n8n refuses to save a workflow larger than its
	// N8N_PAYLOAD_SIZE_MAX, 16 MiB by default.
	maxWorkflows = 16 << 20
	// maxErrorAnswer is how much of an answer that is not a success is
	// read for n8n's message.
	maxErrorAnswer = 64 << 10
	// callTimeout bounds one call, from sending it to the end of its
	// answer: a slow drip is cut there.
	callTimeout = 30 * time.Second
)

// ErrTooLarge is returned for an answer larger than n8n ever sends for
// the request: the rest is not read.
var ErrTooLarge = errors.New("n8n's answer is larger than n8n sends for it")

// caller sends requests with the API key to one n8n's API.
type caller struct {
	base string // …/api/v1
	key  string
	http *http.Client
}

func newCaller(base, key string) caller {
	return caller{base: strings.TrimRight(base, "/"), key: key,
		http: &http.Client{Timeout: callTimeout, CheckRedirect: CheckRedirect}}
}

// answer is what n8n answered to one call. A body that is not a success
// is its start only.
type answer struct {
	status int
	html   bool // a web page: the URL is not the API's
	body   []byte
}

// ok reports a 2xx answer.
func (a answer) ok() bool { return a.status >= 200 && a.status <= 299 }

// call sends one request and reads a successful answer up to limit
// bytes. A transport error is returned as net/http gives it (a url.Error,
// which names no secret: the key travels in a header).
func (c caller) call(ctx context.Context, method, path string, q url.Values, body []byte, limit int64) (answer, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return answer{}, fmt.Errorf("n8n: %w", err)
	}
	req.Header.Set("X-N8N-API-KEY", c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, html: strings.Contains(resp.Header.Get("Content-Type"), "text/html")}
	if !a.ok() {
		// Only n8n's message is wanted: the start, whatever its size.
		a.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorAnswer))
		return a, nil
	}
	a.body, err = readCapped(resp.Body, resp.ContentLength, limit)
	if err != nil {
		return a, fmt.Errorf("n8n: read the answer to %s %s: %w", method, path, err)
	}
	return a, nil
}

// readCapped reads a body of declared length (-1: unknown) and refuses
// one longer than limit without reading past it.
func readCapped(r io.Reader, declared, limit int64) ([]byte, error) {
	tooLarge := fmt.Errorf("%w (more than %d MiB; n8n's answers to it are far smaller)", ErrTooLarge, limit>>20)
	if limit < 1<<20 {
		tooLarge = fmt.Errorf("%w (more than %d KiB; n8n's answers to it are far smaller)", ErrTooLarge, limit>>10)
	}
	if declared > limit {
		return nil, tooLarge
	}
	if declared >= 0 {
		b := make([]byte, declared)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	switch {
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, tooLarge
	}
	return b, nil
}

// redacted is the API's address without a password in it, for logs.
func (c caller) redacted() string {
	u, err := url.Parse(c.base)
	if err != nil {
		return "(an address that is not a URL)"
	}
	return u.Redacted()
}
