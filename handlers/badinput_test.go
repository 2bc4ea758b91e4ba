package handlers_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// TestBadInput sends every kind of bad request and checks the precise
// answer and that nothing was written.
func TestBadInput(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, func(c *handlers.Config, _ *store.Options) { c.MaxBody = 4096 })
		long := strings.Repeat("x", 501)
		tests := []struct {
			name   string
			auth   string
			path   string
			body   any
			code   int
			errID  string
			fields []string
		}{
			{"no token", "-", "/v1/claims", claimBody("shop", "a", "1"), 401, "unauthorized", nil},
			{"a wrong token", "Bearer nope", "/v1/claims", claimBody("shop", "a", "1"), 401, "unauthorized", nil},
			{"the token without Bearer", testToken, "/v1/claims", claimBody("shop", "a", "1"), 401, "unauthorized", nil},
			{"basic auth", "Basic dXNlcjpwYXNz", "/v1/claims", claimBody("shop", "a", "1"), 401, "unauthorized", nil},
			{"malformed JSON", "", "/v1/claims", `{"source": "shop",`, 400, "invalid_json", nil},
			{"an array", "", "/v1/claims", `[1, 2]`, 400, "invalid_json", nil},
			{"null", "", "/v1/claims", `null`, 400, "invalid_json", nil},
			{"an empty body", "", "/v1/claims", ``, 400, "invalid_json", nil},
			{"two objects", "", "/v1/claims", `{"source":"a"} {"source":"b"}`, 400, "invalid_json", nil},
			{"an oversized body", "", "/v1/claims", `{"source":"` + strings.Repeat("a", 5000) + `"}`, 413, "body_too_large", nil},
			{"missing fields", "", "/v1/claims", map[string]any{}, 422, "validation_failed",
				[]string{"source", "event_id", "execution_id", "workflow_id"}},
			{"wrong types", "", "/v1/claims", map[string]any{"source": 1, "event_id": true, "execution_id": 1.5,
				"items": "line-1", "workflow_id": 7.5}, 422, "validation_failed", []string{"source", "event_id", "execution_id",
				"items", "workflow_id"}},
			{"a source with a space", "", "/v1/claims", claimBody("my shop", "a", "1"), 422, "validation_failed",
				[]string{"source"}},
			{"a source too long", "", "/v1/claims", claimBody(strings.Repeat("s", 101), "a", "1"), 422,
				"validation_failed", []string{"source"}},
			{"an event id too long", "", "/v1/claims", claimBody("shop", long, "1"), 422, "validation_failed",
				[]string{"event_id"}},
			{"a control character", "", "/v1/claims", claimBody("shop", "a\x00b", "1"), 422, "validation_failed",
				[]string{"event_id"}},
			{"a newline in an event id", "", "/v1/claims", claimBody("shop", "a\nb", "1"), 422, "validation_failed",
				[]string{"event_id"}},
			{"a bad item", "", "/v1/claims", map[string]any{"source": "shop", "event_id": "a", "execution_id": "1",
				"workflow_id": "wf1", "items": []any{"ok", "", map[string]any{}}}, 422, "validation_failed", []string{"items[1]", "items[2]"}},
			{"retry_of is the execution itself", "", "/v1/claims", map[string]any{"source": "shop", "event_id": "a",
				"execution_id": "1", "retry_of": "1", "workflow_id": "wf1"}, 422, "validation_failed", []string{"retry_of"}},
			{"an outcome that is no outcome", "", "/v1/outcomes", map[string]any{"source": "shop", "event_id": "a",
				"execution_id": "1", "outcome": "maybe", "workflow_id": "wf1"}, 422, "validation_failed", []string{"outcome"}},
			{"an outcome without outcome", "", "/v1/outcomes", map[string]any{"source": "shop", "event_id": "a", "execution_id": "1",
				"workflow_id": "wf1"}, 422, "validation_failed", []string{"outcome"}},
			{"a claim without workflow_id", "", "/v1/claims", map[string]any{"source": "shop", "event_id": "a",
				"execution_id": "1"}, 422, "validation_failed", []string{"workflow_id"}},
			{"an outcome without workflow_id", "", "/v1/outcomes", map[string]any{"source": "shop", "event_id": "a",
				"execution_id": "1", "outcome": "done"}, 422, "validation_failed", []string{"workflow_id"}},
			{"an outcome with bad JSON", "", "/v1/outcomes", `{"outcome":`, 400, "invalid_json", nil},
			{"an unknown endpoint", "", "/v1/nope", map[string]any{}, 404, "not_found", nil},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				auth := "Bearer " + testToken
				switch tc.auth {
				case "":
				case "-":
					auth = ""
				default:
					auth = tc.auth
				}
				code, out := s.callAs(t, auth, "POST", tc.path, tc.body)
				if code != tc.code {
					t.Fatalf("status %d, want %d: %v", code, tc.code, out)
				}
				e, _ := out["error"].(map[string]any)
				if e["code"] != tc.errID || e["message"] == "" {
					t.Errorf("error = %v, want code %s and a message", e, tc.errID)
				}
				fields, _ := e["fields"].(map[string]any)
				for _, f := range tc.fields {
					if fields[f] == nil {
						t.Errorf("fields %v do not name %s", fields, f)
					}
				}
				if len(fields) != len(tc.fields) {
					t.Errorf("fields = %v, want exactly %v", fields, tc.fields)
				}
			})
		}
		for _, table := range []string{"webhook_events", "executions", "event_history", "event_executions", "outbox"} {
			if n := s.count(t, table); n != 0 {
				t.Errorf("%s has %d rows after bad requests only", table, n)
			}
		}

		t.Run("unknown fields are ignored", func(t *testing.T) {
			body := claimBody("shop", "extra", "1")
			body["colour"] = "blue"
			if out := s.claim(t, body); out["decision"] != "claimed" {
				t.Errorf("claim = %v", out)
			}
		})

		t.Run("hostile strings are stored as they are", func(t *testing.T) {
			id := `<script>alert("x")</script> / % ü 🙂 ' "`
			s.claim(t, claimBody("shop", id, "2"))
			code, ev := s.call(t, "GET", "/v1/events/shop/"+pathEscape(id), nil)
			if code != http.StatusOK || ev["event_id"] != id {
				t.Errorf("read back: %d %v", code, ev["event_id"])
			}
		})
	})
}

// TestDatabaseDown checks that an unreachable database is a 503 with
// Retry-After, never a 200.
func TestDatabaseDown(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		url := audittest.URL(t, dialect)
		var cut func()
		if dialect == "postgres" {
			url, cut = audittest.Proxy(t, url)
		}
		store := audittest.OpenURL(t, store.Options{URL: url})
		s := startServer(t, handlers.Config{Store: store, Token: testToken, Links: audit.Links{BaseURL: "http://x"}})
		s.claim(t, claimBody("shop", "before", "1"))
		if cut != nil {
			cut()
		} else {
			store.Close()
		}
		for _, path := range []string{"/v1/claims", "/v1/outcomes", "/readyz"} {
			method, body := "POST", `{"source":"shop","event_id":"during","execution_id":"2","workflow_id":"wf1","outcome":"done"}`
			if path == "/readyz" {
				method, body = "GET", ""
			}
			req, _ := http.NewRequestWithContext(context.Background(), method, s.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s with the database down: %d, Retry-After %q: %s", path, resp.StatusCode,
					resp.Header.Get("Retry-After"), raw)
			}
		}
	})
}
