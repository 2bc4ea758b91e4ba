package n8n_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/n8n"
)

// TestRetry: POST /executions/{id}/retry with the original workflow and the
// key; n8n's answers read as the new execution, pruned (404) or refused
// (409, with n8n's words).
func TestRetry(t *testing.T) {
	var body, key string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		body, key = string(raw), r.Header.Get("X-N8N-API-KEY")
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/executions/41/retry":
			io.WriteString(w, `{"id":52,"workflowId":"wf","mode":"retry","status":"success","retryOf":"41"}`)
		case "/api/v1/executions/42/retry":
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"message":"The execution succeeded, so it cannot be retried."}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"Not Found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := n8n.New(srv.URL+"/api/v1", fakeKey, nil)
	ctx := context.Background()
	x, err := c.Retry(ctx, "41")
	if err != nil || x.ID != "52" || x.Mode != "retry" || x.RetryOf != "41" || x.Status != "success" {
		t.Errorf("retry of 41: %+v %v", x, err)
	}
	if body != `{"loadWorkflow":false}` || key != fakeKey {
		t.Errorf("sent body %s with key %q", body, key)
	}
	if _, err := c.Retry(ctx, "42"); !errors.Is(err, audit.ErrNotRetryable) || !strings.Contains(err.Error(), "cannot be retried") {
		t.Errorf("retry of a successful execution: %v", err)
	}
	if _, err := c.Retry(ctx, "43"); !errors.Is(err, audit.ErrExecutionNotFound) {
		t.Errorf("retry of a pruned execution: %v", err)
	}
}
