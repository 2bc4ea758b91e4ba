package n8n_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

// recorder is a server that keeps what reaches it: the host a redirect
// points to, which must never receive the key or a body.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // method, path, key and body of every request
}

// newRecorder serves on host (127.0.0.2 is another host on Linux's
// loopback; elsewhere 127.0.0.1 on another port is another origin too).
func newRecorder(t *testing.T, host string) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.Path+" key="+req.Header.Get("X-N8N-API-KEY")+
			" auth="+req.Header.Get("Authorization")+" body="+string(body))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[],"nextCursor":null,"id":"1","status":"ready"}`)
	}))
	if l, err := net.Listen("tcp", host+":0"); err == nil {
		r.Listener.Close()
		r.Listener = l
	}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// redirector is an n8n whose every answer is a redirect with status to the
// same path at target.
func redirector(t *testing.T, status int, target string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.RequestURI(), status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTheKeyNeverFollowsARedirectElsewhere: every call that carries n8n's
// API key, or a body holding retryaudit's token, refuses a redirect to
// another address and says so; the other address receives nothing.
func TestTheKeyNeverFollowsARedirectElsewhere(t *testing.T) {
	elsewhere := newRecorder(t, "127.0.0.2")
	otherPort := newRecorder(t, "127.0.0.1")
	ctx := context.Background()
	for _, target := range []*recorder{elsewhere, otherPort} {
		for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			n8nAPI := redirector(t, status, target.URL).URL + "/api/v1"
			admin := n8n.NewAdmin(n8nAPI, fakeKey)
			client := n8n.New(n8nAPI, fakeKey, nil)
			for _, tc := range []struct {
				name string
				call func() error
			}{
				{"a lineage lookup", func() error { _, err := client.Execution(ctx, "4711"); return err }},
				{"reconciliation's listing", func() error { _, _, err := client.FailedExecutions(ctx, "", 250); return err }},
				{"reconciliation's read of an execution", func() error { _, err := client.FailedExecution(ctx, "4711"); return err }},
				{"a retry's look at an execution", func() error { _, err := client.ExecutionNow(ctx, "4711"); return err }},
				{"a retry", func() error { _, err := client.Retry(ctx, "4711"); return err }},
				{"connect's GET /discover", func() error { _, err := admin.Discover(ctx); return err }},
				{"connect's GET /credentials", func() error { _, err := admin.Credentials(ctx, "retryaudit"); return err }},
				{"connect's POST /credentials", func() error {
					_, err := admin.CreateCredential(ctx, "retryaudit", "httpHeaderAuth",
						map[string]any{"name": "Authorization", "value": "Bearer " + token})
					return err
				}},
				{"connect's PATCH /credentials/{id}", func() error {
					_, err := admin.UpdateCredential(ctx, "c1", map[string]any{"name": "Authorization", "value": "Bearer " + token})
					return err
				}},
				{"connect's PUT /workflows/{id}", func() error {
					_, err := admin.UpdateWorkflow(ctx, "w1", n8n.WorkflowBody{Name: "x"})
					return err
				}},
			} {
				err := tc.call()
				if err == nil || !strings.Contains(err.Error(), "refused to follow a redirect to another address") ||
					!strings.Contains(err.Error(), target.URL) {
					t.Errorf("%d to %s, %s: err = %v, want the refusal naming where it pointed", status, target.URL, tc.name, err)
				}
			}
		}
		if got := target.received(); len(got) != 0 {
			t.Errorf("%s received %d requests, want none: %q", target.URL, len(got), got)
		}
	}
}

// TestARedirectWithinN8NIsFollowed: a redirect to the same scheme, host
// and port moves no secret anywhere new, and is followed.
func TestARedirectWithinN8NIsFollowed(t *testing.T) {
	fake := newFakeN8N(t)
	fake.add("4711", "webhook", "", "success")
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, "/old"); ok {
			http.Redirect(w, r, p, http.StatusMovedPermanently)
			return
		}
		fake.Config.Handler.ServeHTTP(w, r)
	}))
	defer moved.Close()
	x, err := n8n.New(moved.URL+"/old/api/v1", fakeKey, nil).Execution(context.Background(), "4711")
	if err != nil || x.ID != "4711" {
		t.Fatalf("a redirect within n8n: %+v, %v", x, err)
	}
}

// TestARefusedRedirectIsLoggedOnce: reconciliation against an n8n that
// redirects elsewhere logs one WARN line saying so, however many passes.
func TestARefusedRedirectIsLoggedOnce(t *testing.T) {
	elsewhere := newRecorder(t, "127.0.0.2")
	var logs syncBuffer
	client := n8n.New(redirector(t, http.StatusFound, elsewhere.URL).URL+"/api/v1", fakeKey, nil)
	client.Log = slog.New(slog.NewTextHandler(&logs, nil))
	s := audittest.Open(t, "sqlite", store.Options{})
	r := &n8n.Reconciler{Client: client, Store: s, Log: slog.New(slog.DiscardHandler), Grace: time.Minute, Lookback: time.Hour}
	r.Run(context.Background()) // the first pass notes where n8n stands
	for range 5 {
		if err := r.Run(context.Background()); !n8n.IsAPIFailure(err) {
			t.Fatalf("a pass against a redirecting n8n: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "redirects elsewhere") {
		t.Errorf("%d WARN lines, want one saying n8n redirects elsewhere:\n%s", n, logs.String())
	}
	if got := elsewhere.received(); len(got) != 0 {
		t.Errorf("the other host received %q", got)
	}
}
