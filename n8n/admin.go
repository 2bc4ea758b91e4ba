package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Admin calls the parts of n8n's public API that wire retryaudit into an
// n8n (retryaudit connect): the API key's scopes, credentials, workflows
// and their publication. Its errors never hold the key.
type Admin struct {
	base string // …/api/v1
	key  string
	http *http.Client
}

// NewAdmin returns a client of the public API at apiURL (such as
// http://127.0.0.1:5678/api/v1).
func NewAdmin(apiURL, key string) *Admin {
	return &Admin{base: strings.TrimRight(apiURL, "/"), key: key, http: &http.Client{Timeout: 30 * time.Second}}
}

// APIError is an answer of n8n's API that is not a success.
type APIError struct {
	Method, Path string
	Status       int
	Message      string // n8n's "message", or the start of a body that is not JSON
	HTML         bool   // the answer was a web page: the URL is not the API's
}

func (e *APIError) Error() string {
	return fmt.Sprintf("n8n answered %s %s with %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// StatusOf returns the HTTP status of an APIError, or 0.
func StatusOf(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// call sends one request and decodes a JSON answer into out (when not nil).
func (a *Admin) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	u := a.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("n8n: %w", err)
	}
	req.Header.Set("X-N8N-API-KEY", a.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("n8n does not answer at %s: %w", a.base, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("n8n: read the answer to %s %s: %w", method, path, err)
	}
	html := strings.Contains(resp.Header.Get("Content-Type"), "text/html") || bytes.HasPrefix(bytes.TrimSpace(raw), []byte("<"))
	if resp.StatusCode < 200 || resp.StatusCode > 299 || html {
		e := &APIError{Method: method, Path: path, Status: resp.StatusCode, HTML: html}
		var msg struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &msg) == nil && msg.Message != "" {
			e.Message = msg.Message
		} else {
			e.Message = strings.TrimSpace(string(raw[:min(len(raw), 120)]))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("n8n: the answer to %s %s is not what n8n sends: %w", method, path, err)
	}
	return nil
}

// Discovery is what GET /discover says the key may do.
type Discovery struct {
	Scopes    []string
	Endpoints map[string]bool // "POST /api/v1/workflows/{workflowId}/publish"
}

// Discover asks n8n which scopes the key has and which endpoints it opens.
func (a *Admin) Discover(ctx context.Context) (Discovery, error) {
	var answer struct {
		Data struct {
			Scopes    []string `json:"scopes"`
			Resources map[string]struct {
				Endpoints []struct {
					Method string `json:"method"`
					Path   string `json:"path"`
				} `json:"endpoints"`
			} `json:"resources"`
		} `json:"data"`
	}
	if err := a.call(ctx, http.MethodGet, "/discover", nil, nil, &answer); err != nil {
		return Discovery{}, err
	}
	d := Discovery{Scopes: answer.Data.Scopes, Endpoints: map[string]bool{}}
	for _, r := range answer.Data.Resources {
		for _, e := range r.Endpoints {
			d.Endpoints[e.Method+" "+e.Path] = true
		}
	}
	return d, nil
}

// Credential is a credential as n8n lists it (never its data).
type Credential struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	UpdatedAt string `json:"updatedAt"`
}

// Credentials lists every credential the key can see.
func (a *Admin) Credentials(ctx context.Context) ([]Credential, error) {
	var all []Credential
	q := url.Values{"limit": {"250"}}
	for {
		var page struct {
			Data       []Credential `json:"data"`
			NextCursor *string      `json:"nextCursor"`
		}
		if err := a.call(ctx, http.MethodGet, "/credentials", q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// CreateCredential creates a credential with its data.
func (a *Admin) CreateCredential(ctx context.Context, name, typ string, data map[string]any) (Credential, error) {
	var c Credential
	err := a.call(ctx, http.MethodPost, "/credentials", nil, map[string]any{"name": name, "type": typ, "data": data}, &c)
	return c, err
}

// UpdateCredential replaces a credential's data.
func (a *Admin) UpdateCredential(ctx context.Context, id string, data map[string]any) (Credential, error) {
	var c Credential
	err := a.call(ctx, http.MethodPatch, "/credentials/"+url.PathEscape(id), nil, map[string]any{"data": data}, &c)
	return c, err
}

// Workflow is a stored workflow as the public API returns it. Nodes,
// connections and settings stay generic: what connect does not change, it
// sends back as it came.
type Workflow struct {
	ID              string           `json:"id"`
	Name            string           `json:"name"`
	Active          bool             `json:"active"`
	VersionID       string           `json:"versionId"`
	ActiveVersionID string           `json:"activeVersionId"`
	Nodes           []map[string]any `json:"nodes"`
	Connections     map[string]any   `json:"connections"`
	Settings        map[string]any   `json:"settings"`
	StaticData      map[string]any   `json:"staticData"`
}

// Published reports whether the workflow's newest version is the one n8n
// runs.
func (w Workflow) Published() bool {
	return w.Active && w.ActiveVersionID != "" && w.ActiveVersionID == w.VersionID
}

// WorkflowBody is what creating or updating a workflow sends. Settings are
// merged by n8n into the stored ones: only the keys sent change.
type WorkflowBody struct {
	Name        string           `json:"name"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
	StaticData  map[string]any   `json:"staticData,omitempty"`
}

// Workflows lists every workflow the key can see.
func (a *Admin) Workflows(ctx context.Context) ([]Workflow, error) {
	var all []Workflow
	q := url.Values{"limit": {"250"}, "excludePinnedData": {"true"}}
	for {
		var page struct {
			Data       []Workflow `json:"data"`
			NextCursor *string    `json:"nextCursor"`
		}
		if err := a.call(ctx, http.MethodGet, "/workflows", q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// Workflow reads one workflow.
func (a *Admin) Workflow(ctx context.Context, id string) (Workflow, error) {
	var w Workflow
	err := a.call(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id), url.Values{"excludePinnedData": {"true"}}, nil, &w)
	return w, err
}

// CreateWorkflow stores a new, unpublished workflow.
func (a *Admin) CreateWorkflow(ctx context.Context, b WorkflowBody) (Workflow, error) {
	var w Workflow
	err := a.call(ctx, http.MethodPost, "/workflows", nil, b, &w)
	return w, err
}

// UpdateWorkflow saves a workflow; n8n publishes the update at once when
// the workflow is published.
func (a *Admin) UpdateWorkflow(ctx context.Context, id string, b WorkflowBody) (Workflow, error) {
	var w Workflow
	err := a.call(ctx, http.MethodPut, "/workflows/"+url.PathEscape(id), nil, b, &w)
	return w, err
}

// Publish publishes a workflow's newest version. n8n finishes publishing
// in the background: see WebhookRegistered.
func (a *Admin) Publish(ctx context.Context, id string) (Workflow, error) {
	var w Workflow
	err := a.call(ctx, http.MethodPost, "/workflows/"+url.PathEscape(id)+"/publish", nil, map[string]any{}, &w)
	return w, err
}

// WebhookRegistered asks n8n, as a browser's CORS preflight does, whether
// the production webhook at path answers: n8n answers 204 for a webhook it
// has registered and an error for one it has not (yet). It is how connect
// sees that publishing finished, which the public API does not show.
func (a *Admin) WebhookRegistered(ctx context.Context, path string) (bool, error) {
	u := a.Origin() + "/webhook/" + strings.TrimLeft(path, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodOptions, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Origin", a.Origin())
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := a.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("n8n's webhooks do not answer at %s: %w", u, errors.Unwrap(err))
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent, nil
}

// Origin is n8n's address without the API's path: where its webhooks are
// unless n8n's WEBHOOK_URL moves them.
func (a *Admin) Origin() string {
	return strings.TrimSuffix(a.base, "/api/v1")
}
