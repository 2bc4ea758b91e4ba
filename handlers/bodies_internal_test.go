package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestBodyBudgetSpent: while the bytes of bodies that arrived fill the
// budget, another request with a body is answered 503 busy with
// Retry-After; once they are handled, it is read as usual.
func TestBodyBudgetSpent(t *testing.T) {
	h, err := New(Config{Store: audittest.Open(t, "sqlite", store.Options{}), Token: "tok",
		MaxBody: 1 << 20, MaxErrorBody: 1 << 20, BodyBudget: 1 << 20, Links: audit.Links{BaseURL: "http://x"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Engine())
	t.Cleanup(srv.Close)
	post := func() *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/n8n/errors", strings.NewReader(`{"workflow":{"id":"other"}}`))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	held := int64(1<<20 - 10) // what other requests' bodies brought so far
	if !h.bodies.TryAcquire(held) {
		t.Fatal("the budget is not free at start")
	}
	if resp := post(); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("with the budget spent: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	h.bodies.Release(held)
	if resp := post(); resp.StatusCode != http.StatusAccepted {
		t.Errorf("with the budget free again: %d", resp.StatusCode)
	}
	if !h.bodies.TryAcquire(1 << 20) {
		t.Error("the refused and the accepted request left bytes held")
	}
}
