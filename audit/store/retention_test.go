package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

func TestRetention(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		claim := func(event, exec string) {
			if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: exec}); err != nil {
				t.Fatal(err)
			}
		}
		report := func(event, exec string, o audit.Outcome) {
			if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event, Outcome: o,
				ExecutionID: exec}); err != nil {
				t.Fatal(err)
			}
		}
		record := func(exec, retryOf string) {
			if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + exec,
				ExecutionID: exec, RetryOf: retryOf, Message: "boom", Payload: `{"big":"payload"}`}); err != nil {
				t.Fatal(err)
			}
		}
		claim("done-old", "1")
		record("1", "")
		report("done-old", "1", audit.OutcomeUnknown)
		report("done-old", "1", audit.OutcomeDone)
		claim("processing-old", "2")
		record("2", "")
		claim("failed-old", "3")
		report("failed-old", "3", audit.OutcomeFailed)
		record("90", "") // links to nothing
		claim("done-old-redelivered", "6")
		report("done-old-redelivered", "6", audit.OutcomeDone)
		clock.Advance(20 * 24 * time.Hour)
		claim("done-old-redelivered", "7") // the sender still redelivers: the key stays
		clock.Advance(9 * 24 * time.Hour)
		claim("done-recent", "5")
		report("done-recent", "5", audit.OutcomeDone)
		clock.Advance(2 * 24 * time.Hour)

		now := clock.Now()
		var total audit.Pruned
		for i := 0; i < 10; i++ {
			p, err := s.Prune(ctx, now.Add(-30*24*time.Hour), now.Add(-14*24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			total.Events += p.Events
			total.Errors += p.Errors
			total.Payloads += p.Payloads
			total.Executions += p.Executions
			if p == (audit.Pruned{}) {
				break
			}
		}
		if total.Events != 1 || total.Errors != 1 {
			t.Errorf("pruned %+v, want 1 event and 1 unlinked error", total)
		}
		for _, ev := range []string{"processing-old", "failed-old", "done-recent", "done-old-redelivered"} {
			if _, err := s.Event(ctx, "shop", ev); err != nil {
				t.Errorf("%s was deleted: %v", ev, err)
			}
		}
		if _, err := s.Event(ctx, "shop", "done-old"); audit.ErrorCode(err) != audit.CodeNotFound {
			t.Errorf("done-old is still there: %v", err)
		}
		var history, outbox, errs int
		s.DB().Get(&history, s.DB().Rebind(`SELECT count(*) FROM event_history WHERE event_id = ?`), "done-old")
		s.DB().Get(&outbox, s.DB().Rebind(`SELECT count(*) FROM outbox WHERE event_id = ?`), "done-old")
		s.DB().Get(&errs, s.DB().Rebind(`SELECT count(*) FROM n8n_errors WHERE execution_id IN ('1', '90')`))
		if history+outbox+errs != 0 {
			t.Errorf("left behind: %d history lines, %d alerts, %d errors", history, outbox, errs)
		}
		var kept audit.N8NErrorRecord
		if err := s.DB().Get(&kept.PayloadDropped, s.DB().Rebind(`SELECT payload_dropped FROM n8n_errors WHERE execution_id = ?`), "2"); err != nil {
			t.Fatal(err)
		}
		if !kept.PayloadDropped || total.Payloads != 1 {
			t.Errorf("the old payload was not dropped (dropped %d)", total.Payloads)
		}
		if x, _, _, err := s.Lineage(ctx, "2"); err != nil || x.ID != "2" {
			t.Errorf("an execution of a live entry was deleted: %v", err)
		}
		if _, _, _, err := s.Lineage(ctx, "1"); audit.ErrorCode(err) != audit.CodeNotFound {
			t.Errorf("the pruned event's execution stays: %v", err)
		}
	})
}

func TestSQLiteIsSingleInstance(t *testing.T) {
	url := audittest.URL(t, "sqlite")
	first, err := store.Open(context.Background(), store.Options{URL: url, Exclusive: true, Redactor: n8n.Redactor{}})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = store.Open(context.Background(), store.Options{URL: url, Exclusive: true, Redactor: n8n.Redactor{}})
	if err == nil || !containsAll(err.Error(), "another retryaudit process", "single-instance", "PostgreSQL") {
		t.Errorf("a second serving process: %v", err)
	}
	reader, err := store.Open(context.Background(), store.Options{URL: url, Redactor: n8n.Redactor{}}) // migrate and check may open it
	if err != nil {
		t.Errorf("a non-serving process: %v", err)
	} else {
		reader.Close()
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestRetentionKeepsWhatOthersReferTo: one execution touched two events and
// failed; its error is linked to the first and in the history of both. When
// the first is done and old, it goes, but the error stays for the second,
// still processing, whose history points at it: its link keeps working.
func TestRetentionKeepsWhatOthersReferTo(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		for _, ev := range []string{"batch-a", "batch-b"} {
			if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: "50"}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:50",
			ExecutionID: "50", Message: "boom"})
		if err != nil || res.Linked == nil {
			t.Fatalf("record: %+v %v", res, err)
		}
		done := res.Linked.EventID
		other := "batch-b"
		if done == "batch-b" {
			other = "batch-a"
		}
		if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: done, ExecutionID: "50",
			Outcome: audit.OutcomeDone}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(40 * 24 * time.Hour)
		now := clock.Now()
		if _, err := s.PruneAll(ctx, now.Add(-30*24*time.Hour), now.Add(-14*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Event(ctx, "shop", done); audit.ErrorCode(err) != audit.CodeNotFound {
			t.Fatalf("the done entry stays: %v", err)
		}
		ev, err := s.Event(ctx, "shop", other)
		if err != nil {
			t.Fatal(err)
		}
		var refs []int64
		for _, l := range ev.History {
			if l.ErrorID != nil {
				refs = append(refs, *l.ErrorID)
			}
		}
		if len(refs) != 1 || refs[0] != res.ID {
			t.Fatalf("the processing entry's history refers to errors %v, want [%d]", refs, res.ID)
		}
		e, err := s.Error(ctx, res.ID)
		if err != nil {
			t.Fatalf("the error its history points at was deleted: %v", err)
		}
		if k, ok := e.Linked(); !ok || k.EventID != other {
			t.Errorf("the kept error is linked to %+v, want %s", k, other)
		}
	})
}

// TestRetentionPrunesGroupThreads: the thread of a group of unlinked errors
// goes once it is older than the retention. Its statement matched
// 'group::%', sqlx's escape of a colon, which the store's own binder keeps
// as it is: no thread was ever pruned.
func TestRetentionPrunesGroupThreads(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorTrigger, DedupeKey: "sha256:g",
			WorkflowID: "poll", Node: "RSS", Message: "boom"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		rows, err := s.LeaseOutbox(ctx, "worker", time.Minute, 10)
		if err != nil || len(rows) != 1 || !strings.HasPrefix(rows[0].ThreadKey, "group:") {
			t.Fatalf("leased %+v (%v), want the group's alert", rows, err)
		}
		root := audit.ThreadRoot{Key: rows[0].ThreadKey, Destination: "C1", MessageID: "1.0", RowID: rows[0].ID}
		if ok, err := s.FinishOutbox(ctx, rows[0].ID, "worker", audit.Attempt{State: audit.OutboxSent,
			Root: &root}); !ok || err != nil {
			t.Fatalf("finish: %v %v", ok, err)
		}
		threads := func() (n int) {
			if err := s.DB().Get(&n, `SELECT count(*) FROM slack_threads WHERE thread_key LIKE 'group:%'`); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := threads(); n != 1 {
			t.Fatalf("%d group threads kept, want 1", n)
		}
		clock.Advance(40 * 24 * time.Hour)
		now := clock.Now()
		if _, err := s.PruneAll(ctx, now.Add(-30*24*time.Hour), now.Add(-14*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := threads(); n != 0 {
			t.Errorf("%d group threads stay after their retention", n)
		}
	})
}
