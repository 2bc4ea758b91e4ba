package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/handlers"
)

// TestDeepBodiesCannotStopTheService sends every endpoint that takes a JSON
// body ten million brackets, plain, mixed and after a valid prefix (a body of
// 3 million once ended the process with a stack overflow), and bodies just
// under the limit that nest too deep: each is refused with a 400 or 413, and
// the service answers the next claim. The endpoints are read from the route
// table, so a new one is tried too.
func TestDeepBodiesCannotStopTheService(t *testing.T) {
	const tenMillion = 10_000_000
	fill := func(prefix, unit string, size int) []byte {
		return []byte(prefix + strings.Repeat(unit, (size-len(prefix))/len(unit)))
	}
	prefixes := map[string]string{
		"/v1/claims":         `{"source":"shop","event_id":"deep","execution_id":"1","items":`,
		"/v1/outcomes":       `{"source":"shop","event_id":"deep","outcome":"done","reason":`,
		"/v1/n8n/errors":     `{"execution":{"id":"1","error":{"message":"deep"}},"workflow":{"id":"w"},"a":`,
		"/v1/n8n/executions": `{"reports":`,
		"default":            `{"a":`,
	}
	audittest.Each(t, func(t *testing.T, dialect string) {
		s, _ := newRetryServer(t, dialect, withHookToken) // the retry endpoints too
		var posts []string
		for _, r := range s.routes {
			if r.Method == http.MethodPost && strings.HasPrefix(r.Path, "/v1/") {
				posts = append(posts, r.Path)
			}
		}
		if len(posts) < 3 {
			t.Fatalf("the route table has %d POST endpoints under /v1: %v", len(posts), posts)
		}
		for _, path := range posts {
			prefix, ok := prefixes[path]
			if !ok {
				prefix = prefixes["default"]
			}
			bodies := map[string][]byte{
				"ten million [":                      fill("", "[", tenMillion),
				"ten million {":                      fill("", "{", tenMillion),
				`ten million bytes of {"a":`:         fill("", `{"a":`, tenMillion),
				`ten million bytes of [{"a":`:        fill("", `[{"a":`, tenMillion),
				"ten million [ after a valid prefix": fill(prefix, "[", tenMillion),
				`{"a":[ mixed after a valid prefix`:  fill(prefix, `{"a":[`, tenMillion),
				"65 levels after a valid prefix":     []byte(prefix + strings.Repeat("[", 65) + strings.Repeat("]", 65) + "}"),
				"a body just under the limit, all [": fill(prefix, "[", 1<<20-1),
			}
			// A route with parameters is called at a path it serves.
			at := map[string]string{"/v1/events/:source/*event_id": "/v1/events/shop/deep/retry",
				"/v1/retries/:id/cancel": "/v1/retries/1/cancel"}[path]
			if at == "" {
				at = path
			}
			for name, body := range bodies {
				t.Run(path+" refuses "+name, func(t *testing.T) {
					code, out := s.raw(t, "POST", at, body, false)
					if code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge {
						t.Fatalf("%d, want 400 or 413: %.300s", code, out)
					}
					var answer struct {
						Error struct{ Code, Message string }
					}
					if err := json.Unmarshal([]byte(out), &answer); err != nil {
						t.Fatalf("the answer is no JSON error: %.300s", out)
					}
					// A body the service read to the depth limit says so.
					if code == http.StatusBadRequest && len(body) > len(prefix)+handlers.MaxNesting &&
						strings.HasPrefix(string(body), prefix+"[[") &&
						!strings.Contains(answer.Error.Message, "64 levels") {
						t.Errorf("the answer does not name the nesting limit: %s", out)
					}
				})
			}
		}
		s.claim(t, claimBody("shop", "after-the-deep-bodies", "2"))
		if n := s.count(t, "n8n_errors"); n != 0 {
			t.Errorf("%d errors recorded from refused bodies", n)
		}
	})
}
