package handlers_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/metrics"
)

const testToken = "test-token-0123456789"

// server is the service's HTTP surface on a fresh store.
type server struct {
	*httptest.Server
	store  *store.Store
	client *http.Client
	routes gin.RoutesInfo
}

// newServer starts the handlers on a fresh database of the dialect. edit,
// when given, changes the configuration first.
func newServer(t *testing.T, dialect string, edit ...func(*handlers.Config, *store.Options)) *server {
	t.Helper()
	opts := store.Options{}
	cfg := handlers.Config{Token: testToken, MaxBody: 1 << 20, Metrics: metrics.New(), ServeMetrics: true,
		Links: audit.Links{BaseURL: "http://retryaudit.test"}}
	for _, e := range edit {
		e(&cfg, &opts)
	}
	if opts.Metrics == nil {
		opts.Metrics = cfg.Metrics
	}
	cfg.Store = audittest.Open(t, dialect, opts)
	return startServer(t, cfg)
}

func startServer(t *testing.T, cfg handlers.Config) *server {
	t.Helper()
	if cfg.APITimeout == 0 {
		cfg.APITimeout = audittest.Patience(t)
	}
	h, err := handlers.New(cfg)
	if err != nil {
		t.Fatalf("handlers.New: %v", err)
	}
	engine := h.Engine()
	ts := httptest.NewUnstartedServer(engine)
	ts.Start()
	t.Cleanup(ts.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 200}
	t.Cleanup(tr.CloseIdleConnections)
	return &server{Server: ts, store: cfg.Store, client: &http.Client{Transport: tr}, routes: engine.Routes()}
}

// call sends a request with the test token and decodes the JSON answer.
func (s *server) call(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return s.callAs(t, "Bearer "+testToken, method, path, body)
}

func (s *server) callAs(t *testing.T, auth, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encode body: %v", err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: answer is not JSON (%d): %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out
}

// withWorkflow is body with the workflow id the shipped workflow always
// sends ("wf1"), unless it names one (or says workflow_id: null, to leave
// it out).
func withWorkflow(body map[string]any) map[string]any {
	if v, ok := body["workflow_id"]; ok {
		if v == nil {
			out := maps.Clone(body)
			delete(out, "workflow_id")
			return out
		}
		return body
	}
	out := maps.Clone(body)
	out["workflow_id"] = "wf1"
	return out
}

// claim posts a claim and fails the test unless it is answered 200.
func (s *server) claim(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	code, out := s.call(t, "POST", "/v1/claims", withWorkflow(body))
	if code != http.StatusOK {
		t.Fatalf("claim %v: status %d: %v", body, code, out)
	}
	return out
}

func (s *server) outcome(t *testing.T, body map[string]any) (int, map[string]any) {
	t.Helper()
	return s.call(t, "POST", "/v1/outcomes", withWorkflow(body))
}

// count returns the number of rows of a table, for "nothing was written".
func (s *server) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := s.store.DB().Get(&n, "SELECT count(*) FROM "+table); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func pathEscape(s string) string { return url.PathEscape(s) }

func claimBody(source, eventID, execution string) map[string]any {
	return map[string]any{"source": source, "event_id": eventID, "execution_id": execution,
		"workflow_id": "wf1", "workflow_name": "Orders to CRM", "node": "Claim event", "run_stamp": stampOf(execution)}
}

// stampOf is the run stamp the shipped workflow's execution id makes.
func stampOf(execution string) string {
	return execution + ":1764925200000:test"
}

func newBenchServer(b *testing.B, h *handlers.Handler) string {
	ts := httptest.NewServer(h.Engine())
	b.Cleanup(ts.Close)
	return ts.URL
}
