package handlers_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// raw sends a request with the token (or as a signed-in person for pages)
// and returns the status and the body.
func (s *server) raw(t *testing.T, method, path string, body []byte, page bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	switch {
	case page:
		req.SetBasicAuth("alice", alicePassword)
	case path == "/v1/n8n/executions": // n8n's hooks have a token of their own
		req.Header.Set("Authorization", "Bearer "+testHookToken)
	case personRoute(method, path): // a person's act: the pages' sign-in
		req.SetBasicAuth("alice", alicePassword)
	default:
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestBadBytesMatrix sends bad bytes in every place a request can carry
// them, to both databases: never a 5xx; ids are refused 422 naming the field,
// not rewritten; an error payload is recorded whatever it holds, the same on
// both databases.
func TestBadBytesMatrix(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		claim := func(field, rawValue string) []byte {
			f := map[string]string{"source": `"shop"`, "event_id": `"e-1"`, "execution_id": `"1"`}
			f[field] = rawValue
			return []byte(fmt.Sprintf(`{"source":%s,"event_id":%s,"execution_id":%s}`, f["source"], f["event_id"], f["execution_id"]))
		}
		// Each bad value and the one answer it gets: 422 naming the field
		// for text that is not what was sent (checked on the raw bytes,
		// never rewritten), 400 for a raw control character, which is no
		// JSON.
		badValues := map[string]struct {
			raw  string
			code int
		}{
			"invalid UTF-8":     {"\"inv-\xff\"", http.StatusUnprocessableEntity},
			"a lone surrogate":  {`"inv-\ud800"`, http.StatusUnprocessableEntity},
			"a lone low half":   {`"inv-\udc00x"`, http.StatusUnprocessableEntity},
			"an escaped NUL":    {`"inv-\u0000"`, http.StatusUnprocessableEntity},
			"a raw control":     {"\"inv-\x01\"", http.StatusBadRequest},
			"overlong encoding": {"\"inv-\xc0\xaf\"", http.StatusUnprocessableEntity},
		}
		for name, v := range badValues {
			for _, field := range []string{"source", "event_id", "execution_id"} {
				t.Run("a claim's "+field+" with "+name, func(t *testing.T) {
					code, body := s.raw(t, "POST", "/v1/claims", claim(field, v.raw), false)
					if code != v.code {
						t.Fatalf("%d, want %d: %s", code, v.code, body)
					}
					if code == http.StatusUnprocessableEntity && !strings.Contains(body, `"`+field+`"`) {
						t.Errorf("the answer does not name %s: %s", field, body)
					}
				})
			}
			t.Run("an outcome's reason with "+name, func(t *testing.T) {
				body := []byte(`{"source":"shop","event_id":"e-1","outcome":"done","execution_id":"1","reason":` + v.raw + `}`)
				code, out := s.raw(t, "POST", "/v1/outcomes", body, false)
				if code != v.code {
					t.Fatalf("%d, want %d: %s", code, v.code, out)
				}
				if code == http.StatusUnprocessableEntity && !strings.Contains(out, `"reason"`) {
					t.Errorf("the answer does not name reason: %s", out)
				}
			})
		}
		if n := s.count(t, "webhook_events"); n != 0 {
			t.Errorf("bad ids wrote %d events", n)
		}

		t.Run("two ids that differ only in invalid bytes are not one key", func(t *testing.T) {
			for _, id := range []string{"\"inv-\xff\"", "\"inv-\xfe\""} {
				code, body := s.raw(t, "POST", "/v1/claims", claim("event_id", id), false)
				if code != http.StatusUnprocessableEntity || !strings.Contains(body, "UTF-8") {
					t.Errorf("%q: %d %s", id, code, body)
				}
			}
		})

		intake := map[string]string{
			"NUL in the message":       `{"execution":{"id":"701","mode":"webhook","error":{"message":"bo\u0000om"}},"workflow":{"id":"w"}}`,
			"NUL in the workflow name": `{"execution":{"id":"702","mode":"webhook","error":{"message":"x"}},"workflow":{"id":"w","name":"a\u0000b"}}`,
			"NUL in the URL":           `{"execution":{"id":"703","url":"http://n8n/\u0000","error":{"message":"x"}},"workflow":{"id":"w"}}`,
			"NUL in retryOf":           `{"execution":{"id":"704","retryOf":"7\u00000","error":{"message":"x"}},"workflow":{"id":"w"}}`,
			"NUL in the id":            `{"execution":{"id":"70\u00005","error":{"message":"x"}},"workflow":{"id":"w"}}`,
			"NUL in a key":             `{"execution":{"id":"706","error":{"message":"x","a\u0000b":1}},"workflow":{"id":"w"}}`,
			"invalid UTF-8":            "{\"execution\":{\"id\":\"707\",\"error\":{\"message\":\"bad \xff byte\"}},\"workflow\":{\"id\":\"w\"}}",
			"lone surrogates":          `{"execution":{"id":"708","error":{"message":"\ud800 alone"}},"workflow":{"name":"\udfff"}}`,
			"a trigger error with NUL": `{"trigger":{"mode":"trigger","error":{}},"workflow":{"id":"w"},"message":"\u0000"}`,
			"raw control characters":   "{\"execution\":{\"id\":\"709\",\"error\":{\"message\":\"line\nbreak\x00\"}},\"workflow\":{\"id\":\"w\"}}",
		}
		for name, body := range intake {
			t.Run("an error payload with "+name+" is recorded", func(t *testing.T) {
				code, out := s.raw(t, "POST", "/v1/n8n/errors", []byte(body), false)
				if code != http.StatusAccepted {
					t.Fatalf("%d: %s", code, out)
				}
			})
		}
		t.Run("ids that differ only in bytes the decoder would replace stay two errors, and name no execution", func(t *testing.T) {
			for _, pair := range [][2]string{{"7\xff", "7\xfe"}, {`7\ud800`, `7\udbff`}, {`7\udc00`, "7\xed\xb0\x80"}} {
				for _, id := range pair {
					body := `{"execution":{"id":"` + id + `","mode":"webhook","error":{"message":"boom"}},"workflow":{"id":"w"}}`
					code, out := s.raw(t, "POST", "/v1/n8n/errors", []byte(body), false)
					var res map[string]any
					json.Unmarshal([]byte(out), &res)
					note := fmt.Sprint(res["note"])
					if code != http.StatusAccepted || res["duplicate"] != false || res["execution_id"] != nil ||
						!strings.Contains(note, "execution.id was not used as an id") || !strings.Contains(note, audit.NoteVisible) {
						t.Fatalf("execution id %q: %d %s", id, code, out)
					}
				}
			}
			var rec struct {
				Message string `db:"message"`
				Note    string `db:"intake_note"`
			}
			q := s.store.DB().Rebind(`SELECT message, intake_note FROM n8n_errors WHERE execution_id = ?`)
			if err := s.store.DB().Get(&rec, q, "707"); err != nil {
				t.Fatal(err)
			}
			if rec.Message != `bad \xff byte` || rec.Note != audit.NoteVisible {
				t.Errorf("stored %q with note %q", rec.Message, rec.Note)
			}
		})
		t.Run("replaced bytes leave a note and the same text on both databases", func(t *testing.T) {
			var rec struct {
				Message string `db:"message"`
				Note    string `db:"intake_note"`
			}
			if err := s.store.DB().Get(&rec, s.store.DB().Rebind(`SELECT message, intake_note FROM n8n_errors WHERE execution_id = ?`), "701"); err != nil {
				t.Fatal(err)
			}
			if rec.Message != "bo\uFFFDom" || rec.Note != audit.NoteCleaned {
				t.Errorf("stored %q with note %q", rec.Message, rec.Note)
			}
		})

		queries := []string{
			"/v1/events?source=%00", "/v1/events?source=%FF", "/v1/events?prefix=%00", "/v1/events?prefix=%FF%FE",
			"/v1/events?status=%00", "/v1/events?cursor=%00", "/v1/events?cursor=AAAA",
			"/v1/events?cursor=" + crafted("2026-01-01T00:00:00Z\x00sh\xffop\x00x"),
			"/v1/events?cursor=" + crafted("2026-01-01T00:00:00Z\x00shop\x00a\x00b"),
			"/v1/events?older_than=%00", "/v1/events?limit=%FF", "/v1/events?needs_review=%00",
			"/v1/events/%FF/x", "/v1/events/shop/%00", "/v1/events/shop/%FF%FE", "/v1/events/%00/%00",
			"/v1/events/~/%FF/%FF", "/v1/events/~/AA/", "/v1/events/shop/x?history_cursor=%FF",
			"/v1/events/shop/x?history_limit=-1",
		}
		pages := []string{
			"/?source=%00", "/?source=%FF", "/?prefix=%00%FF", "/?cursor=%FF", "/?status=%FF",
			"/?cursor=" + crafted("2026-01-01T00:00:00Z\x00shop\x00\xff"),
			"/executions/%FF", "/executions/%00", "/exec/%FF", "/exec/_w", "/errors/%FF", "/errors/%00",
			"/errors?kind=%00", "/errors?before=%FF", "/events/shop/%FF", "/events/%00/x", "/events/shop/x?before=%FF",
			"/review?x=%FF",
		}
		for _, path := range append(queries, pages...) {
			t.Run("GET "+path, func(t *testing.T) {
				code, body := s.raw(t, "GET", path, nil, !strings.HasPrefix(path, "/v1/"))
				if code >= 500 {
					t.Errorf("%d: %.300s", code, body)
				}
			})
		}
	})
}

// crafted encodes a cursor as the service does, with any content.
func crafted(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }

// TestOversizedErrorPayloads: a payload over RETRYAUDIT_MAX_BODY is still
// recorded with its summary and a note; past the hard cap, what was read up
// to it is.
func TestOversizedErrorPayloads(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, func(c *handlers.Config, _ *store.Options) {
			c.MaxBody, c.MaxErrorBody = 1<<20, 3<<20
		})
		s.claim(t, claimBody("shop", "big-1", "801"))
		big := func(exec string, size int) []byte {
			return []byte(`{"execution":{"id":"` + exec + `","mode":"webhook","lastNodeExecuted":"Create CRM order",` +
				`"error":{"message":"the CRM answered 500","node":{"name":"Create CRM order","parameters":{"jsonBody":"` +
				strings.Repeat("x", size) + `"}},"context":{"data":"` + strings.Repeat("y", size) + `"}}},` +
				`"workflow":{"id":"wf1","name":"Orders to CRM"}}`)
		}
		t.Run("2 MiB: recorded with its summary, the payload cut", func(t *testing.T) {
			code, out := s.call(t, "POST", "/v1/n8n/errors", big("801", 1<<20))
			if code != http.StatusAccepted || out["kind"] != "execution_error" || linked(out) != "shop/big-1" ||
				!strings.Contains(fmt.Sprint(out["note"]), "RETRYAUDIT_MAX_BODY") {
				t.Fatalf("%d %v", code, out)
			}
			e, err := s.store.Error(t.Context(), int64(out["error_id"].(float64)))
			if err != nil {
				t.Fatal(err)
			}
			if e.Message != "the CRM answered 500" || e.Node != "Create CRM order" || e.WorkflowName != "Orders to CRM" ||
				!e.PayloadTruncated || len(e.Payload) > audit.MaxStoredPayload || e.Note == "" {
				t.Errorf("stored %q node %q workflow %q truncated %v payload %d bytes note %q",
					e.Message, e.Node, e.WorkflowName, e.PayloadTruncated, len(e.Payload), e.Note)
			}
			if code, again := s.call(t, "POST", "/v1/n8n/errors", big("801", 1<<20)); code != http.StatusOK || again["duplicate"] != true {
				t.Errorf("the same big payload again: %d %v", code, again)
			}
		})
		t.Run("past the hard cap: what was read is recorded", func(t *testing.T) {
			code, out := s.call(t, "POST", "/v1/n8n/errors", big("802", 2<<20))
			if code != http.StatusAccepted || out["execution_id"] != "802" ||
				!strings.Contains(fmt.Sprint(out["note"]), "RETRYAUDIT_MAX_ERROR_BODY") {
				t.Fatalf("%d %v", code, out)
			}
		})
		t.Run("a body that is no object is still refused", func(t *testing.T) {
			code, _ := s.call(t, "POST", "/v1/n8n/errors", `["`+strings.Repeat("z", 2<<20)+`"]`)
			if code != http.StatusBadRequest {
				t.Errorf("%d", code)
			}
		})
	})
}

// TestDotIDsReachTheirPages: "." and ".." are ids like any other; their
// links survive browsers' dot-segment rules and lead to their own page.
func TestDotIDsReachTheirPages(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		for _, id := range []string{".", ".."} {
			out := s.claim(t, map[string]any{"source": "shop", "event_id": id, "execution_id": ".."})
			link := strings.TrimPrefix(out["event_url"].(string), "http://retryaudit.test")
			if !strings.HasPrefix(link, "/events/~/") {
				t.Fatalf("event_url %s", out["event_url"])
			}
			resp, body := s.page(t, "GET", link, "alice:"+alicePassword, nil)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<h1 class="id">shop / `+id+`</h1>`) {
				t.Errorf("%s: %d", link, resp.StatusCode)
			}
			if code, ev := s.call(t, "GET", "/v1"+link, nil); code != http.StatusOK || ev["event_id"] != id {
				t.Errorf("/v1%s: %d %v", link, code, ev["event_id"])
			}
		}
		resp, body := s.page(t, "GET", "/exec/Li4", "alice:"+alicePassword, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Execution ..") {
			t.Errorf("/exec/Li4: %d", resp.StatusCode)
		}
	})
}

// TestHistoryIsPaged: an event redelivered many times answers one page of
// history, newest first, with a cursor and the counts.
func TestHistoryIsPaged(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		for i := range 130 {
			s.claim(t, claimBody("shop", "busy-1", fmt.Sprint(1000+i)))
		}
		code, ev := s.call(t, "GET", "/v1/events/shop/busy-1", nil)
		history, _ := ev["history"].([]any)
		if code != http.StatusOK || len(history) != 100 || ev["history_total"] != 130.0 || ev["history_next_cursor"] == nil {
			t.Fatalf("%d: %d lines, total %v, cursor %v", code, len(history), ev["history_total"], ev["history_next_cursor"])
		}
		if first := history[0].(map[string]any); first["execution_id"] != "1129" {
			t.Errorf("the first line is %v, want the newest (1129)", first["execution_id"])
		}
		if counts := ev["history_counts"].(map[string]any); counts["claim"] != 130.0 {
			t.Errorf("counts %v", counts)
		}
		_, next := s.call(t, "GET", "/v1/events/shop/busy-1?history_cursor="+ev["history_next_cursor"].(string), nil)
		rest := next["history"].([]any)
		if len(rest) != 30 || next["history_next_cursor"] != nil || rest[0].(map[string]any)["execution_id"] != "1029" {
			t.Errorf("the second page: %d lines, cursor %v", len(rest), next["history_next_cursor"])
		}
		resp, page := s.page(t, "GET", "/events/shop/busy-1", "alice:"+alicePassword, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Older history") || strings.Count(page, `<li class="kind-claim">`) != 100 {
			t.Errorf("the page: %d, %d lines", resp.StatusCode, strings.Count(page, `<li class="kind-claim">`))
		}
	})
}
