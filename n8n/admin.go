package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Admin calls the parts of n8n's public API that wire retryaudit into an
// n8n (retryaudit connect): the API key's scopes, credentials, workflows
// and their publication. Its calls are bounded as the Client's are (call.go,
// pager.go, redirect.go); its errors never hold the key, and n8n's words
// in them are printable (said).
type Admin struct {
	api  caller
	base string // …/api/v1
}

// NewAdmin returns a client of the public API at apiURL (such as
// http://127.0.0.1:5678/api/v1).
func NewAdmin(apiURL, key string) *Admin {
	api := newCaller(apiURL, key)
	return &Admin{api: api, base: api.base}
}

// APIError is an answer of n8n's API that is not a success.
type APIError struct {
	Method, Path string
	Status       int
	Message      string // n8n's "message", or the start of a body that is not JSON, made printable (said)
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

// call sends one request, reads an answer of at most limit bytes and
// decodes it into out (when not nil); it returns the answer's size.
func (a *Admin) call(ctx context.Context, method, path string, q url.Values, body any, limit int64, out any) (int, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	ans, err := a.api.call(ctx, method, path, q, raw, limit)
	if err != nil {
		var ue *url.Error
		switch {
		case errors.Is(err, ErrTooLarge):
			return 0, err
		case errors.Is(err, ErrRedirectRefused) && errors.As(err, &ue):
			return 0, fmt.Errorf("n8n at %s: %w", a.base, ue.Err)
		case errors.As(err, &ue):
			return 0, fmt.Errorf("n8n does not answer at %s: %w", a.base, ue.Err)
		}
		return 0, fmt.Errorf("n8n does not answer at %s: %w", a.base, err)
	}
	html := ans.html || bytes.HasPrefix(bytes.TrimSpace(ans.body), []byte("<"))
	if !ans.ok() || html {
		e := &APIError{Method: method, Path: path, Status: ans.status, HTML: html}
		var msg struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(ans.body, &msg) == nil && msg.Message != "" {
			e.Message = said(msg.Message)
		} else {
			e.Message = said(string(ans.body))
		}
		return 0, e
	}
	if out == nil {
		return len(ans.body), nil
	}
	if err := json.Unmarshal(ans.body, out); err != nil {
		return 0, fmt.Errorf("n8n: the answer to %s %s is not what n8n sends: %w", method, path, err)
	}
	return len(ans.body), nil
}

// listAll reads every page of a listing, keeping the items keep accepts
// (nil: all of them). It stops where no n8n's listing goes on (pager).
func listAll[T any](ctx context.Context, a *Admin, path string, q url.Values, limit int64, keep func(T) bool) ([]T, error) {
	var all []T
	pages := pager{what: "GET " + path}
	for {
		var page struct {
			Data       []T     `json:"data"`
			NextCursor *string `json:"nextCursor"`
		}
		size, err := a.call(ctx, http.MethodGet, path, q, nil, limit, &page)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Data {
			if keep == nil || keep(item) {
				all = append(all, item)
			}
		}
		next := ""
		if page.NextCursor != nil {
			next = *page.NextCursor
		}
		if more, err := pages.next(size, next); !more {
			return all, err
		}
		q.Set("cursor", next)
	}
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
	if _, err := a.call(ctx, http.MethodGet, "/discover", nil, nil, maxAnswer, &answer); err != nil {
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

// Credentials lists the credentials the key can see that are named name
// (n8n's listing holds every credential: only these are kept).
func (a *Admin) Credentials(ctx context.Context, name string) ([]Credential, error) {
	return listAll(ctx, a, "/credentials", url.Values{"limit": {"250"}}, maxAnswer,
		func(c Credential) bool { return c.Name == name })
}

// CreateCredential creates a credential with its data.
func (a *Admin) CreateCredential(ctx context.Context, name, typ string, data map[string]any) (Credential, error) {
	var c Credential
	_, err := a.call(ctx, http.MethodPost, "/credentials", nil, map[string]any{"name": name, "type": typ, "data": data},
		maxAnswer, &c)
	return c, err
}

// UpdateCredential replaces a credential's data.
func (a *Admin) UpdateCredential(ctx context.Context, id string, data map[string]any) (Credential, error) {
	var c Credential
	_, err := a.call(ctx, http.MethodPatch, "/credentials/"+url.PathEscape(id), nil, map[string]any{"data": data}, maxAnswer, &c)
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

// workflowsPage is how many workflows a page of the listing asks for: a
// page holds them whole (n8n's API has no lighter listing).
const workflowsPage = 50

// Workflows lists every workflow the key can see, as far as planning
// reads them (see listedWorkflow); Workflow reads one whole.
func (a *Admin) Workflows(ctx context.Context) ([]Workflow, error) {
	q := url.Values{"limit": {fmt.Sprint(workflowsPage)}, "excludePinnedData": {"true"}}
	listed, err := listAll[listedWorkflow](ctx, a, "/workflows", q, maxWorkflows, nil)
	out := make([]Workflow, len(listed))
	for i, w := range listed {
		out[i] = w.Workflow
	}
	return out, err
}

// Workflow reads one workflow.
func (a *Admin) Workflow(ctx context.Context, id string) (Workflow, error) {
	var w Workflow
	_, err := a.call(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id), url.Values{"excludePinnedData": {"true"}}, nil,
		maxWorkflows, &w)
	return w, err
}

// CreateWorkflow stores a new, unpublished workflow.
func (a *Admin) CreateWorkflow(ctx context.Context, b WorkflowBody) (Workflow, error) {
	var w Workflow
	_, err := a.call(ctx, http.MethodPost, "/workflows", nil, b, maxWorkflows, &w)
	return w, err
}

// UpdateWorkflow saves a workflow; n8n publishes the update at once when
// the workflow is published.
func (a *Admin) UpdateWorkflow(ctx context.Context, id string, b WorkflowBody) (Workflow, error) {
	var w Workflow
	_, err := a.call(ctx, http.MethodPut, "/workflows/"+url.PathEscape(id), nil, b, maxWorkflows, &w)
	return w, err
}

// Publish publishes a workflow's newest version. n8n finishes publishing
// in the background: see WebhookRegistered.
func (a *Admin) Publish(ctx context.Context, id string) (Workflow, error) {
	var w Workflow
	_, err := a.call(ctx, http.MethodPost, "/workflows/"+url.PathEscape(id)+"/publish", nil, map[string]any{}, maxWorkflows, &w)
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
	resp, err := a.api.http.Do(req)
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
