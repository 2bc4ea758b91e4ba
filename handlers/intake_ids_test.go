package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// execError is an Error Trigger body of a failed run; id is the JSON text
// of execution.id, as sent.
func execError(id string) string {
	return `{"execution":{"id":` + id + `,"mode":"webhook","lastNodeExecuted":"CRM","error":{"message":"boom"}},` +
		`"workflow":{"id":"wf1","name":"Orders"}}`
}

// TestErrorIDsAreTheCallers: an id in an error payload is used exactly as
// it was sent, or not at all. The default instance's token cannot attach an
// error to staging's execution by naming "4711@staging"; a typed "\xff"
// and a raw 0xff byte are never one execution; ids are not trimmed, cut or
// cleaned into one another.
func TestErrorIDsAreTheCallers(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		t.Run("another instance's execution cannot be named", func(t *testing.T) {
			s := newServer(t, dialect, withStaging)
			if code, out := s.staging(t, "POST", "/v1/claims", claimBody("shop", "staged", "4711")); code != http.StatusOK {
				t.Fatalf("staging's claim: %d %v", code, out)
			}
			for _, call := range []func(*testing.T, string, string, any) (int, map[string]any){s.call, s.staging} {
				code, out := call(t, "POST", "/v1/n8n/errors", execError(`"4711@staging"`))
				if code != http.StatusAccepted || out["linked_event"] != nil || out["execution_id"] != nil ||
					!strings.Contains(fmt.Sprint(out["note"]), "execution.id was not used as an id") {
					t.Errorf("an error naming 4711@staging: %d %v", code, out)
				}
			}
			if ev := s.event(t, "shop", "staged"); ev["errors_total"] != 0.0 || ev["needs_review"] != false {
				t.Errorf("staging's event took the error: %v errors, review %v", ev["errors_total"], ev["needs_review"])
			}
			code, out := s.staging(t, "POST", "/v1/n8n/errors", execError(`"4711"`))
			if code != http.StatusAccepted || linked(out) != "shop/staged" || out["execution_id"] != "4711@staging" {
				t.Errorf("staging's own error: %d %v", code, out)
			}
			// The error first, the claim after: an error waiting for its
			// claim is linked when it comes.
			s.call(t, "POST", "/v1/n8n/errors", execError(`"4800@staging"`))
			s.staging(t, "POST", "/v1/claims", claimBody("shop", "staged-later", "4800"))
			if ev := s.event(t, "shop", "staged-later"); ev["errors_total"] != 0.0 || ev["needs_review"] != false {
				t.Errorf("staging's later event took the error: %v errors, review %v", ev["errors_total"], ev["needs_review"])
			}
		})

		t.Run("a typed escape and a raw byte are two executions", func(t *testing.T) {
			typed, raw := execError(`"coll-\\xff"`), execError("\"coll-\xff\"")
			for _, order := range [][]string{{typed, raw}, {raw, typed}} {
				s := newServer(t, dialect)
				seen := map[string]bool{}
				for _, body := range order {
					code, out := s.call(t, "POST", "/v1/n8n/errors", body)
					if code != http.StatusAccepted || out["duplicate"] != false {
						t.Fatalf("%q: %d %v", body, code, out)
					}
					seen[fmt.Sprint(out["execution_id"])] = true
				}
				if !seen[`coll-\xff`] || !seen["<nil>"] {
					t.Errorf("execution ids %v: want the typed one kept as sent, the raw byte used as no id", seen)
				}
				if n := s.count(t, "n8n_errors"); n != 2 {
					t.Errorf("%d errors, want 2", n)
				}
			}
		})

		t.Run("ids are not trimmed, cut or cleaned into another", func(t *testing.T) {
			s := newServer(t, dialect)
			long := strings.Repeat("7", 150)
			for _, pair := range [][2]string{
				{`"77"`, `" 77"`},
				{`"` + long + `1"`, `"` + long + `2"`},
				{`"8\ufffd"`, `"8\u0000"`},
			} {
				for i, id := range pair {
					code, out := s.call(t, "POST", "/v1/n8n/errors", execError(id))
					if code != http.StatusAccepted || out["duplicate"] != false {
						t.Errorf("%s after %s: %d %v", id, pair[0], code, out)
					}
					if i == 1 && out["execution_id"] != nil {
						t.Errorf("%s was used as execution %v", id, out["execution_id"])
					}
				}
			}
		})
	})
}
