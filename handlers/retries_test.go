package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/retries"
)

// retryN8N is n8n's API as a retry meets it: executions by id, and a Retry
// that reports done for the event its execution held.
type retryN8N struct {
	*httptest.Server
	mu     sync.Mutex
	status map[string]string // by execution id
	sent   map[string]int
	seq    int
	store  *store.Store
	events map[string]string // the event each execution held
	// started is when every execution started: before the service saw it.
	started time.Time
}

func newRetryN8N(t *testing.T) *retryN8N {
	f := &retryN8N{status: map[string]string{}, sent: map[string]int{}, seq: 900, events: map[string]string{},
		started: time.Now().Add(-time.Minute).UTC()}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *retryN8N) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/api/v1/executions/")
	id, retry := strings.CutSuffix(path, "/retry")
	f.mu.Lock()
	st, ok := f.status[id]
	retryOf := ""
	if strings.HasPrefix(id, "9") {
		retryOf = f.events["of:"+id]
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !ok:
		f.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
		return
	case !retry:
		f.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"id": id, "workflowId": "wf1", "mode": map[bool]string{true: "retry",
			false: "webhook"}[retryOf != ""], "status": st, "retryOf": retryOf,
			"startedAt": f.started.Format(time.RFC3339)})
		return
	case st != "error":
		f.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"message":"The execution succeeded, so it cannot be retried."}`)
		return
	}
	f.sent[id]++
	f.seq++
	newID := fmt.Sprint(f.seq)
	f.status[newID], f.events["of:"+newID] = "running", id
	event := f.events[id]
	f.mu.Unlock()
	_, err := f.store.ReportOutcome(context.Background(), audit.OutcomeRequest{Source: "shop", EventID: event,
		Outcome: audit.OutcomeDone, ExecutionID: newID, WorkflowID: "wf1", CRMRef: "CRM-" + newID})
	if err != nil {
		fmt.Println("the Retry's report:", err)
	}
	f.mu.Lock()
	f.status[newID] = "success"
	f.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"id": newID, "workflowId": "wf1", "mode": "retry", "status": "success",
		"retryOf": id})
}

func (f *retryN8N) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.sent {
		n += c
	}
	return n
}

// newRetryServer is a server with people, a fake n8n and the retrier.
func newRetryServer(t *testing.T, dialect string, edit ...func(*handlers.Config, *store.Options)) (*server, *retryN8N) {
	f := newRetryN8N(t)
	client := n8n.New(f.URL+"/api/v1", "key", nil)
	cfg := handlers.Config{Token: testToken, MaxBody: 1 << 20, Metrics: metrics.New(), ServeMetrics: true,
		Links: audit.Links{BaseURL: "http://retryaudit.test"}}
	opts := store.Options{Lookup: client}
	withUI(&cfg, &opts)
	for _, e := range edit {
		e(&cfg, &opts)
	}
	cfg.Store = audittest.Open(t, dialect, opts)
	f.store = cfg.Store
	cfg.Retrier = retries.New(retries.Config{Store: cfg.Store, N8N: client, Rate: 6000, InFlight: 2, Metrics: cfg.Metrics})
	s := startServer(t, cfg)
	t.Cleanup(cfg.Retrier.Close) // no run outlives its test
	return s, f
}

// failed makes a failed entry (its holder reported failed; n8n failed the
// execution) and returns its version.
func (f *retryN8N) failed(t *testing.T, s *server, id, execution string, status audit.Status) int64 {
	t.Helper()
	f.mu.Lock()
	f.status[execution], f.events[execution] = "running", id
	f.mu.Unlock()
	s.claim(t, claimBody("shop", id, execution))
	if status != audit.StatusProcessing {
		if code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": id, "execution_id": execution,
			"outcome": string(status), "run_stamp": stampOf(execution)}); code != http.StatusOK {
			t.Fatalf("outcome: %d %v", code, out)
		}
	}
	f.mu.Lock()
	f.status[execution] = map[audit.Status]string{audit.StatusFailed: "error", audit.StatusDone: "success",
		audit.StatusProcessing: "running"}[status]
	f.mu.Unlock()
	d, err := s.store.Event(context.Background(), "shop", id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Version
}

// person calls a /v1 endpoint as alice.
func (s *server) person(t *testing.T, method, path string, body any, headers ...string) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		if s, ok := body.(string); ok {
			raw = []byte(s)
		}
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, s.URL+path, rd)
	req.SetBasicAuth("alice", alicePassword)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if len(headers) == 1 && headers[0] == "no-auth" {
		req.Header.Del("Authorization")
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, resp.Header
}

func errorOf(out map[string]any) map[string]any {
	e, _ := out["error"].(map[string]any)
	return e
}

func TestRetryAPI(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s, f := newRetryServer(t, dialect)
		v := f.failed(t, s, "o1", "41", audit.StatusFailed)
		vp := f.failed(t, s, "o2", "42", audit.StatusProcessing)
		vd := f.failed(t, s, "o3", "43", audit.StatusDone)

		t.Run("n8n's token does not open a person's act", func(t *testing.T) {
			code, out, _ := s.person(t, "POST", "/v1/events/shop/o1/retry", map[string]any{"version": v}, "no-auth")
			if code != http.StatusUnauthorized || errorOf(out)["code"] != "unauthorized" {
				t.Errorf("%d %v", code, out)
			}
		})
		t.Run("a request from another site is refused", func(t *testing.T) {
			code, _, _ := s.person(t, "POST", "/v1/events/shop/o1/retry", map[string]any{"version": v},
				"Sec-Fetch-Site", "cross-site")
			if code != http.StatusForbidden {
				t.Errorf("%d", code)
			}
		})
		t.Run("bad bodies are 4xx naming the problem", func(t *testing.T) {
			for _, c := range []struct {
				body  any
				code  int
				field string
			}{
				{map[string]any{}, 422, "version"},
				{map[string]any{"version": "7"}, 422, "version"},
				{map[string]any{"version": v, "verison": 1}, 422, "verison"},
				{"{", 400, ""},
			} {
				code, out, _ := s.person(t, "POST", "/v1/events/shop/o1/retry", c.body)
				fields, _ := errorOf(out)["fields"].(map[string]any)
				if code != c.code || c.field != "" && fields[c.field] == nil {
					t.Errorf("%v: %d %v", c.body, code, out)
				}
			}
		})
		t.Run("processing and done entries are refused, never sent", func(t *testing.T) {
			for id, ver := range map[string]int64{"o2": vp, "o3": vd} {
				code, out, _ := s.person(t, "POST", "/v1/events/shop/"+id+"/retry", map[string]any{"version": ver})
				if code != http.StatusConflict || errorOf(out)["reason"] != retries.ReasonNotFailed {
					t.Errorf("%s: %d %v", id, code, out)
				}
			}
			if f.total() != 0 {
				t.Errorf("%d retries were sent", f.total())
			}
		})
		t.Run("a stale version is refused with the current state", func(t *testing.T) {
			code, out, _ := s.person(t, "POST", "/v1/events/shop/o1/retry", map[string]any{"version": v + 5})
			if code != http.StatusConflict || errorOf(out)["reason"] != retries.ReasonChanged || errorOf(out)["status"] != "failed" {
				t.Errorf("%d %v", code, out)
			}
		})
		t.Run("a failed entry is retried once and ends done", func(t *testing.T) {
			code, out, _ := s.person(t, "POST", "/v1/events/shop/o1/retry", map[string]any{"version": v})
			res, _ := out["result"].(map[string]any)
			if code != http.StatusOK || res["state"] != "succeeded" || res["execution_id"] != "41" {
				t.Fatalf("%d %v", code, out)
			}
			d, _ := s.store.Event(context.Background(), "shop", "o1")
			if d.Status != audit.StatusDone || f.total() != 1 {
				t.Errorf("the entry is %s after %d retries", d.Status, f.total())
			}
			if n := s.scrape(t, `retryaudit_retries_total{result="succeeded"}`); n != 1 {
				t.Errorf("retryaudit_retries_total{result=\"succeeded\"} is %v, want 1", n)
			}
		})
		t.Run("bulk: bad filters are 422 naming the field, nothing sent", func(t *testing.T) {
			for _, c := range []struct {
				body  any
				field string
			}{
				{map[string]any{"dry_run": true}, "filter"},
				{map[string]any{"from": "yesterday"}, "from"},
				{map[string]any{"from": "2026-12-06T10:00:00Z", "to": "2026-12-06T09:00:00Z"}, "to"},
				{map[string]any{"sorce": "shop"}, "sorce"},
				{map[string]any{"events": []any{map[string]any{"source": "shop"}}}, "events[0].event_id"},
				{map[string]any{"source": "shop", "events": []any{map[string]any{"source": "shop", "event_id": "x"}}}, "events"},
			} {
				code, out, _ := s.person(t, "POST", "/v1/retries", c.body)
				fields, _ := errorOf(out)["fields"].(map[string]any)
				if code != http.StatusUnprocessableEntity || fields[c.field] == nil {
					t.Errorf("%v: %d %v", c.body, code, out)
				}
			}
		})
		t.Run("bulk: the dry run plans, the run retries, progress and summary are read back", func(t *testing.T) {
			for i := range 3 {
				f.failed(t, s, fmt.Sprintf("b%d", i), fmt.Sprint(50+i), audit.StatusFailed)
			}
			before := f.total()
			code, out, _ := s.person(t, "POST", "/v1/retries", map[string]any{"source": "shop", "dry_run": true})
			plan, _ := out["plan"].(map[string]any)
			if code != http.StatusOK || plan["retries"] != float64(3) || f.total() != before {
				t.Fatalf("%d %v", code, out)
			}
			skipped, _ := plan["skipped"].(map[string]any)
			if skipped["processing"] != float64(1) || plan["done_not_listed"] != float64(2) {
				t.Errorf("plan %v", plan)
			}
			code, out, hdr := s.person(t, "POST", "/v1/retries", map[string]any{"source": "shop"})
			if code != http.StatusAccepted || !strings.HasPrefix(hdr.Get("Location"), "/v1/retries/") {
				t.Fatalf("%d %v", code, out)
			}
			loc := hdr.Get("Location")
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, out, _ = s.person(t, "GET", loc, nil)
				run, _ := out["run"].(map[string]any)
				if code == http.StatusOK && run["state"] == "finished" {
					if !strings.Contains(out["summary"].(string), "3 retried (3 succeeded") {
						t.Errorf("summary %v", out["summary"])
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run did not finish: %v", out)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if f.total() != before+3 {
				t.Errorf("%d retries sent, want 3", f.total()-before)
			}
			if code, out, _ := s.person(t, "POST", loc+"/cancel", nil); code != http.StatusConflict {
				t.Errorf("cancel of a finished run: %d %v", code, out)
			}
			if code, _, _ := s.person(t, "GET", "/v1/retries/999", nil); code != http.StatusNotFound {
				t.Errorf("an unknown run: %d", code)
			}
		})
	})
}

func TestRetryPages(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s, f := newRetryServer(t, dialect)
		v := f.failed(t, s, "p1", "61", audit.StatusFailed)
		f.failed(t, s, "p2", "62", audit.StatusFailed)
		_, body := s.page(t, "GET", "/events/shop/p1", "alice:"+alicePassword, nil)
		if !strings.Contains(body, "Retry in n8n") || !strings.Contains(body, `name="to" value="retry"`) {
			t.Fatal("the failed event's page offers no Retry in n8n")
		}
		resp, _ := s.page(t, "POST", "/events/shop/p1", "alice:"+alicePassword,
			url.Values{"to": {"retry"}, "version": {fmt.Sprint(v)}})
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "retried=succeeded") {
			t.Fatalf("the form answered %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		_, body = s.page(t, "GET", resp.Header.Get("Location"), "alice:"+alicePassword, nil)
		if !strings.Contains(body, "finished successfully") || !strings.Contains(body, "Retry in n8n asked by alice") {
			t.Error("the event's page does not say what the retry did")
		}
		// The same form again: stale, nothing sent.
		resp, body = s.page(t, "POST", "/events/shop/p1", "alice:"+alicePassword,
			url.Values{"to": {"retry"}, "version": {fmt.Sprint(v)}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Nothing was sent to n8n") || f.total() != 1 {
			t.Errorf("the stale form answered %d, %d sent", resp.StatusCode, f.total())
		}

		// The bulk page: a preview, then a run, then its summary.
		_, body = s.page(t, "GET", "/retries?source=shop", "alice:"+alicePassword, nil)
		if !strings.Contains(body, "Preview: 1 to retry") || !strings.Contains(body, "Nothing has been sent yet") || f.total() != 1 {
			t.Fatalf("the preview: %s", body)
		}
		plan := regexpFind(body, `name="plan" value="([^"]*)"`)
		resp, _ = s.page(t, "POST", "/retries", "alice:"+alicePassword, url.Values{"plan": {unescapeHTML(plan)}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("start: %d", resp.StatusCode)
		}
		loc := resp.Header.Get("Location")
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(body, "1 retried (1 succeeded") {
			if time.Now().After(deadline) {
				t.Fatalf("the run page: %s", body)
			}
			time.Sleep(50 * time.Millisecond)
			_, body = s.page(t, "GET", loc, "alice:"+alicePassword, nil)
		}
		if f.total() != 2 {
			t.Errorf("%d retries sent, want 2", f.total())
		}
		resp, _ = s.pageWith(t, "POST", "/retries", "alice:"+alicePassword, url.Values{"plan": {unescapeHTML(plan)}},
			map[string]string{"Sec-Fetch-Site": "cross-site"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a cross-site start: %d", resp.StatusCode)
		}
	})
}

func regexpFind(s, expr string) string {
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}

func unescapeHTML(s string) string { return html.UnescapeString(s) }

// personRoute says whether a /v1 route is a person's act, signed in as
// the pages are (the retries).
func personRoute(method, path string) bool {
	return method == http.MethodPost && strings.HasPrefix(path, "/v1/events/") || strings.HasPrefix(path, "/v1/retries")
}
