package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// outboxKinds counts the alerts written about an event, by kind.
func (s *server) outboxKinds(t *testing.T, source, eventID string) map[string]int {
	t.Helper()
	var rows []struct {
		Payload string `db:"payload"`
	}
	if err := s.store.DB().Select(&rows, s.store.DB().Rebind(`SELECT payload FROM outbox WHERE thread_key = ? AND kind <> 'refresh'`),
		audit.EventThread(source, eventID)); err != nil {
		t.Fatalf("read outbox: %v", err)
	}
	kinds := map[string]int{}
	for _, r := range rows {
		for _, k := range []string{audit.AlertNotHolder, audit.AlertNews, audit.AlertUnknown, audit.AlertStale,
			audit.AlertExecutionError} {
			if strings.Contains(r.Payload, `"kind":"`+k+`"`) {
				kinds[k]++
			}
		}
	}
	return kinds
}

// TestFence covers what the holder's fence does beyond TestOneHolder: the
// alert a refused report raises, items, a client retry_of n8n denies, the
// one-click confirmation of evidence on an entry taken over since.
func TestFence(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		t.Run("a refused done is alerted, once, and the stale detector stays quiet", func(t *testing.T) {
			clock := audittest.NewClock(time.Now())
			s := newServer(t, dialect, func(_ *handlers.Config, o *store.Options) {
				o.Now, o.ReviewAfter = clock.Now, time.Minute
			})
			s.claim(t, claimBody("shop", "f1", "A"))
			body := outcomeBody("f1", "Z", "done")
			body["crm_ref"] = "CRM-Z"
			for range 3 { // Retry On Fail resends it
				if code, out := s.outcome(t, body); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" {
					t.Fatalf("Z's done: %d %v", code, out)
				}
			}
			if k := s.outboxKinds(t, "shop", "f1"); k[audit.AlertNotHolder] != 1 {
				t.Errorf("alerts = %v, want one not_holder", k)
			}
			if ev := s.event(t, "shop", "f1"); ev["review_reason"] != "not_holder" {
				t.Errorf("review_reason = %v", ev["review_reason"])
			}
			clock.Advance(2 * time.Minute)
			if n, err := s.store.DetectStale(context.Background()); err != nil || n != 0 {
				t.Errorf("DetectStale = %d, %v: the refused report was alerted already", n, err)
			}
			if k := s.outboxKinds(t, "shop", "f1"); k[audit.AlertStale] != 0 {
				t.Errorf("alerts = %v after the stale check", k)
			}
		})

		t.Run("a refused failed is no alert", func(t *testing.T) {
			s := newServer(t, dialect)
			s.claim(t, claimBody("shop", "f2", "A"))
			if code, _ := s.outcome(t, outcomeBody("f2", "Z", "failed")); code != http.StatusConflict {
				t.Fatalf("Z's failed: %d", code)
			}
			if n := s.count(t, "outbox"); n != 0 {
				t.Errorf("%d alerts for a stray failed", n)
			}
		})

		t.Run("a refused done on a done entry is alerted: a second order may exist", func(t *testing.T) {
			s := newServer(t, dialect)
			s.claim(t, claimBody("shop", "f3", "A"))
			s.outcome(t, outcomeBody("f3", "A", "done"))
			if code, out := s.outcome(t, outcomeBody("f3", "Z", "done")); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" {
				t.Fatalf("Z's done: %d %v", code, out)
			}
			if k := s.outboxKinds(t, "shop", "f3"); k[audit.AlertNotHolder] != 1 {
				t.Errorf("alerts = %v, want one not_holder", k)
			}
			if ev := s.event(t, "shop", "f3"); ev["status"] != "done" || ev["holder_execution_id"] != "A" {
				t.Errorf("the refused report moved the entry: %v", ev)
			}
		})

		t.Run("items are fenced one by one", func(t *testing.T) {
			s := newServer(t, dialect)
			body := claimBody("shop", "f4", "A")
			body["items"] = []string{"a", "b"}
			s.claim(t, body)
			stray := outcomeBody("f4", "Z", "done")
			stray["item"] = "a"
			code, out := s.outcome(t, stray)
			if e := apiErr(out); code != http.StatusConflict || e["code"] != "not_holder" || e["holder"] != "A" {
				t.Fatalf("Z's done of item a: %d %v", code, out)
			}
			ev := s.event(t, "shop", "f4")
			items := map[string]map[string]any{}
			for _, it := range ev["items"].([]any) {
				m := it.(map[string]any)
				items[m["item"].(string)] = m
			}
			if items["a"]["status"] != "processing" || items["a"]["review_reason"] != "not_holder" {
				t.Errorf("item a = %v", items["a"])
			}
			if items["b"]["review_reason"] != nil && items["b"]["review_reason"] != "" {
				t.Errorf("item b went to review: %v", items["b"])
			}
			line := lastOfKind(s.history(t, "shop", "f4"), "not_holder")
			if line == nil || line["item"] != "a" {
				t.Errorf("evidence line = %v", line)
			}
			// The holder still moves its items.
			own := outcomeBody("f4", "A", "done")
			own["item"] = "a"
			if code, out := s.outcome(t, own); code != http.StatusOK || out["changed"] != true {
				t.Errorf("A's done of item a: %d %v", code, out)
			}
			own["item"], own["outcome"] = "b", "failed"
			if code, out := s.outcome(t, own); code != http.StatusOK || out["changed"] != true {
				t.Errorf("A's failed of item b: %d %v", code, out)
			}
			// b failed: a new execution may take it, not a.
			again := claimBody("shop", "f4", "B")
			again["items"] = []string{"a", "b"}
			out = s.claim(t, again)
			got := map[string]string{}
			for _, it := range out["items"].([]any) {
				m := it.(map[string]any)
				got[m["item"].(string)] = m["decision"].(string)
			}
			if got["a"] != "duplicate" || got["b"] != "reclaimed" {
				t.Errorf("B's claim = %v", got)
			}
			// A's late done of b (its answer lost) is now a former holder's.
			own["outcome"] = "done"
			if code, out := s.outcome(t, own); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" || apiErr(out)["holder"] != "B" {
				t.Errorf("A's late done of item b: %d %v", code, out)
			}
		})

		t.Run("with the n8n API a client retry_of that n8n denies grants nothing", func(t *testing.T) {
			n8n := newFakeLookup()
			s := newServer(t, dialect, withLookup(n8n))
			n8n.add("X", "webhook", "")
			n8n.add("Y", "webhook", "") // n8n says Y is a delivery, not a Retry of X
			s.claim(t, claimBody("shop", "f5", "X"))
			body := claimBody("shop", "f5", "Y")
			body["retry_of"] = "X"
			out := s.claim(t, body)
			note, _ := out["lineage_note"].(string)
			if out["process"] != false || out["decision"] != "in_progress" || out["delivery"] != "redelivery" ||
				!strings.Contains(note, `execution Y has mode "webhook", it is no retry`) ||
				!strings.Contains(note, "the retry_of X it sent is not n8n's") {
				t.Fatalf("Y = %v", out)
			}
			if ev := s.event(t, "shop", "f5"); ev["holder_execution_id"] != "X" {
				t.Errorf("holder = %v, want X", ev["holder_execution_id"])
			}
			// And its outcome moves nothing.
			if code, out := s.outcome(t, outcomeBody("f5", "Y", "done")); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" {
				t.Errorf("Y's done: %d %v", code, out)
			}
		})

		t.Run("confirming evidence on an entry taken over since asks whether anything runs", func(t *testing.T) {
			s := newServer(t, dialect, withUI)
			alice := "alice:" + alicePassword
			s.claim(t, claimBody("shop", "f6", "60"))
			body := outcomeBody("f6", "62", "done")
			body["crm_ref"] = "CRM-62"
			s.outcome(t, body)
			// A person finds no order and lets a retry run; 63 takes it.
			form := url.Values{"to": {"failed"}, "note": {"no order in the CRM"}, "holder": {"60"}}
			if resp, page := s.page(t, "POST", "/events/shop/f6", alice, form); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("resolve failed: %d\n%s", resp.StatusCode, page)
			}
			if out := s.claim(t, claimBody("shop", "f6", "63")); out["decision"] != "reclaimed" {
				t.Fatalf("63 = %v", out)
			}
			_, page := s.page(t, "GET", "/events/shop/f6", alice, nil)
			i := strings.Index(page, `<form class="confirm"`)
			if i < 0 {
				t.Fatalf("no confirmation form for 62's report:\n%s", page)
			}
			confirm := page[i:]
			confirm = confirm[:strings.Index(confirm, "</form>")]
			if !strings.Contains(confirm, `name="confirm" value="yes" required`) || !strings.Contains(confirm, "63 holds it now") {
				t.Errorf("the one-click form of a running entry asks for no confirmation:\n%s", confirm)
			}
			click := url.Values{"to": {"done"}, "crm_ref": {"CRM-62"}, "holder": {"63"},
				"note": {"Confirmed the report of execution 62"}}
			if resp, page := s.page(t, "POST", "/events/shop/f6", alice, click); resp.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("unconfirmed click on a running entry: %d\n%s", resp.StatusCode, page)
			}
			if ev := s.event(t, "shop", "f6"); ev["status"] != "processing" || ev["holder_execution_id"] != "63" {
				t.Errorf("the unconfirmed click moved the entry: %v %v", ev["status"], ev["holder_execution_id"])
			}
		})
	})
}

// TestErrorFence: an error of the old holder that is judged while a new
// holder takes the entry over must not put the new holder's entry into
// review. On PostgreSQL the two transactions really interleave (SQLite has
// one writer: they cannot), so the takeover is held open in a transaction
// of its own: the error's batch finds the row held, sets the error aside
// (it never waits for the row) and decides it once the takeover commits.
func TestErrorFence(t *testing.T) {
	s := newServer(t, "postgres")
	s.claim(t, claimBody("shop", "ef1", "A"))
	db := s.store.DB()
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// What a reclaim by B does to the row, uncommitted.
	if _, err := tx.Exec(`UPDATE webhook_events SET holder_execution_id = 'B', version = version + 1,
		updated_at = now() WHERE source = 'shop' AND event_id = 'ef1'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		code, _ := s.callAs(t, "Bearer "+testToken, "POST", "/v1/n8n/errors", `{"execution":{"id":"A","mode":"webhook",
			"error":{"message":"CRM step failed"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`)
		done <- code
	}()
	select {
	case code := <-done:
		t.Fatalf("the error was judged (%d) while the takeover held the row", code)
	case <-time.After(100 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusAccepted {
		t.Fatalf("error intake: %d", code)
	}
	ev := s.event(t, "shop", "ef1")
	if ev["review_reason"] != nil && ev["review_reason"] != "" {
		t.Errorf("the old holder's error put B's entry into review: %v", ev["review_reason"])
	}
	if k := s.outboxKinds(t, "shop", "ef1"); k[audit.AlertExecutionError] != 0 {
		t.Errorf("alerts = %v: the old holder's error alerted about B's entry", k)
	}
}
