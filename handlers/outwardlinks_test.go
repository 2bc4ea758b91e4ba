package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// TestLinksOnlyToConfiguredPlaces: an error payload's execution.url may say
// anything. With RETRYAUDIT_N8N_EDITOR_URL set and a payload that names no
// workflow (so no editor link can be built), no page and no API answer
// links the payload's URL: the pages show it as text, the API under
// reported_url, and n8n_url is only ever the configured editor.
func TestLinksOnlyToConfiguredPlaces(t *testing.T) {
	const evil = "https://evil.example/phish"
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI) // the editor is https://n8n.example
		alice := "alice:" + alicePassword
		s.claim(t, map[string]any{"source": "shop", "event_id": "phish-1", "execution_id": "77"})
		var ids []int64
		for _, exec := range []string{"77", "78"} { // one linked to the claim, one to nothing
			code, out := s.call(t, "POST", "/v1/n8n/errors", fmt.Sprintf(
				`{"execution":{"id":%q,"url":%q,"mode":"webhook","lastNodeExecuted":"CRM","error":{"message":"boom"}},"workflow":{"name":"Orders"}}`,
				exec, evil))
			if code != http.StatusAccepted {
				t.Fatalf("error of %s: %d %v", exec, code, out)
			}
			ids = append(ids, int64(out["error_id"].(float64)))
		}
		pages := []string{"/events/shop/phish-1", "/executions/77", "/executions/78", "/errors",
			fmt.Sprintf("/errors/%d", ids[0]), fmt.Sprintf("/errors/%d", ids[1])}
		for _, path := range pages {
			resp, page := s.page(t, "GET", path, alice, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d", path, resp.StatusCode)
			}
			if strings.Contains(page, `href="https://evil.example`) || strings.Contains(page, `href="`+evil) {
				t.Errorf("%s links the payload's URL:\n%s", path, page)
			}
		}
		for _, path := range pages[4:] {
			_, page := s.page(t, "GET", path, alice, nil)
			if !strings.Contains(page, "<code>"+evil+"</code>") {
				t.Errorf("%s does not show the payload's URL as text", path)
			}
		}
		_, ev := s.call(t, "GET", "/v1/events/shop/phish-1", nil)
		raw, _ := json.Marshal(ev)
		var found bool
		for _, x := range ev["executions"].([]any) {
			x := x.(map[string]any)
			if u, _ := x["n8n_url"].(string); u != "" && !strings.HasPrefix(u, "https://n8n.example/") {
				t.Errorf("n8n_url %q is not built from the editor URL", u)
			}
			found = found || x["reported_url"] == evil
		}
		if !found {
			t.Errorf("the API does not give the payload's URL as reported_url: %s", raw)
		}
	})
}
