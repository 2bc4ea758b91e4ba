//go:build n8n

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRealN8NRetry retries failed executions of the shipped orders
// workflow through the service, on a real n8n: one from the event's page
// ("Retry in n8n", with the pages' sign-in), then five in one bulk run over
// /v1/retries. Each order's CRM was failing (every call answered 500): the
// execution failed, the error workflow reported it, a person marked the
// entry failed after finding no order, and the retry — n8n resumes at the
// failed CRM step — created exactly one order and settled the entry done.
func TestRealN8NRetry(t *testing.T) {
	home := os.Getenv("RETRYAUDIT_TEST_N8N_HOME")
	if home == "" {
		t.Fatal("RETRYAUDIT_TEST_N8N_HOME is unset: run make test-n8n, which installs n8n and sets it")
	}
	s := &suite{crm: newFakeCRM(t), slack: newFakeSlack(t), bin: buildService(t), token: randomToken(),
		hookToken: randomToken()}
	s.serviceURL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	s.n8n = startN8NWith(t, home, n8nConfig{})
	s.wire(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			s.crm.reset()
			r := &run{suite: s, t: t, backend: backend, svc: s.startService(t, backend),
				prefix: map[string]string{"sqlite": "rs", "postgres": "rp"}[backend]}
			t.Run("a failed execution retried from the event's page ends done with one order", r.retryFromPage)
			t.Run("five failed executions retried in one bulk run give one order each", r.retryInBulk)
		})
	}
}

// failedInN8N delivers an order while the CRM fails: the sender is
// answered 500 and n8n lists the execution as failed. It returns the
// holder.
func (r *run) failedInN8N(t *testing.T, id string) string {
	t.Helper()
	r.crm.setMode(crm500)
	status, out := r.deliver(t, "orders", id)
	r.crm.setMode(crmNormal)
	if status != http.StatusInternalServerError {
		t.Fatalf("the sender was answered %d %v; a failed run answers 500", status, out)
	}
	holder := r.ledger(t, "shop", id).HolderExecutionID
	if x := r.n8n.waitExecution(t, holder); x.Status != "error" {
		t.Fatalf("n8n lists execution %s as %s, want error", holder, x.Status)
	}
	return holder
}

// failedByPerson is failedInN8N, then the error workflow reports it, and a
// person who found no order in the CRM marks the entry failed. It returns
// the holder.
func (r *run) failedByPerson(t *testing.T, id string) string {
	t.Helper()
	holder := r.failedInN8N(t, id)
	eventually(t, alertWithin, "the error workflow's report on "+id, func() string {
		if e := r.ledger(t, "shop", id); !e.NeedsReview {
			return "the entry is " + e.Status + ", not in review yet"
		}
		return ""
	})
	if _, ok := r.crm.order("shop:" + id); ok {
		t.Fatalf("the failing CRM has an order for %s", id)
	}
	code, loc := r.svc.form(t, "/events/shop/"+id, url.Values{"to": {"failed"}, "holder": {holder},
		"version": {fmt.Sprint(r.svc.version(t, "shop", id))}, "note": {"no order in the CRM: the CRM was down"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "resolved=failed") {
		t.Fatalf("marking %s failed answered %d %s", id, code, loc)
	}
	return holder
}

func (r *run) retryFromPage(t *testing.T) {
	id := r.newID()
	holder := r.failedByPerson(t, id)
	creates := r.crm.createCount()
	if _, body := r.svc.page(t, r.svc.URL+"/events/shop/"+id); !strings.Contains(body, "Retry in n8n") {
		t.Fatal("the failed event's page offers no Retry in n8n")
	}
	v := r.svc.version(t, "shop", id)
	code, loc := r.svc.form(t, "/events/shop/"+id, url.Values{"to": {"retry"}, "version": {fmt.Sprint(v)}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "retried=succeeded") {
		t.Fatalf("Retry in n8n answered %d %s", code, loc)
	}
	e := r.ledger(t, "shop", id)
	o := r.oneOrder(t, "shop", id)
	if e.Status != "done" || e.CRMRef != o.ID {
		t.Errorf("after the retry the entry is %s with crm_ref %q, want done with %s", e.Status, e.CRMRef, o.ID)
	}
	if n := r.crm.createCount() - creates; n != 1 {
		t.Errorf("the retry sent %d creates, want 1", n)
	}
	retried := false
	for _, h := range e.History {
		retried = retried || h.Kind == "retry" && h.ExecutionID == holder
	}
	if !retried {
		t.Errorf("the history has no retry line for %s: %+v", holder, e.History)
	}
	// The same form again: stale, nothing sent.
	if code, _ := r.svc.form(t, "/events/shop/"+id, url.Values{"to": {"retry"}, "version": {fmt.Sprint(v)}}); code != http.StatusConflict {
		t.Errorf("the same Retry in n8n again answered %d, want 409", code)
	}
	if n := r.crm.createCount() - creates; n != 1 {
		t.Errorf("%d creates after the stale form, want 1", n)
	}
}

func (r *run) retryInBulk(t *testing.T) {
	var ids []string
	var events []map[string]any
	for range 5 {
		id := r.newID()
		r.failedByPerson(t, id)
		ids = append(ids, id)
		events = append(events, map[string]any{"source": "shop", "event_id": id})
	}
	creates := r.crm.createCount()
	code, out := r.svc.personJSON(t, "POST", "/v1/retries", map[string]any{"events": events, "dry_run": true})
	plan, _ := out["plan"].(map[string]any)
	if code != http.StatusOK || plan["retries"] != float64(5) {
		t.Fatalf("the dry run answered %d %v", code, out)
	}
	if r.crm.createCount() != creates {
		t.Fatal("the dry run created orders")
	}
	code, out = r.svc.personJSON(t, "POST", "/v1/retries", map[string]any{"events": events})
	run, _ := out["run"].(map[string]any)
	if code != http.StatusAccepted || run == nil {
		t.Fatalf("the run answered %d %v", code, out)
	}
	path := fmt.Sprintf("/v1/retries/%v", run["id"])
	eventually(t, 3*time.Minute, "the bulk run's end", func() string {
		_, out = r.svc.personJSON(t, "GET", path, nil)
		run, _ = out["run"].(map[string]any)
		if run["state"] != "finished" {
			return fmt.Sprintf("%v: %v", run["state"], out["summary"])
		}
		return ""
	})
	if !strings.Contains(fmt.Sprint(out["summary"]), "5 retried (5 succeeded") {
		t.Errorf("the run's summary: %v", out["summary"])
	}
	for _, id := range ids {
		o := r.oneOrder(t, "shop", id)
		if e := r.ledger(t, "shop", id); e.Status != "done" || e.CRMRef != o.ID {
			t.Errorf("%s is %s with crm_ref %q, want done with %s", id, e.Status, e.CRMRef, o.ID)
		}
	}
	if n := r.crm.createCount() - creates; n != 5 {
		t.Errorf("the bulk run sent %d creates, want 5", n)
	}
}

// form posts a page's form as the user admin and returns the status and
// where it redirects.
func (s *service) form(t *testing.T, path string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("admin", s.Password)
	client := &http.Client{Timeout: 3 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location")
}

// personJSON calls a person's /v1 endpoint as the user admin.
func (s *service) personJSON(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	header := map[string]string{"Authorization": "Basic " +
		base64.StdEncoding.EncodeToString([]byte("admin:"+s.Password))}
	code, raw := do(t, &http.Client{Timeout: 3 * time.Minute}, method, s.URL+path, header, body)
	var out map[string]any
	json.Unmarshal(raw, &out)
	return code, out
}

// version reads an entry's version over /v1, as a form carries it.
func (s *service) version(t *testing.T, source, id string) int64 {
	t.Helper()
	code, raw := do(t, http.DefaultClient, "GET", s.URL+"/v1/events/"+source+"/"+id,
		map[string]string{"Authorization": "Bearer " + s.Token}, nil)
	var e struct {
		Version int64 `json:"version"`
	}
	if code != http.StatusOK || json.Unmarshal(raw, &e) != nil {
		t.Fatalf("GET /v1/events/%s/%s: %d %s", source, id, code, raw)
	}
	return e.Version
}
