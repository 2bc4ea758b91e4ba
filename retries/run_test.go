package retries_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/people"
	"github.com/retryaudit/retryaudit/retries"
)

// waitRun waits until a run stops sending and returns it.
func waitRun(t *testing.T, r *retries.Retrier, id int64, until func(retries.Run) bool) retries.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		run, err := r.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if until(run) {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d: %s (%s)", id, run.State, run.Summary())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBulk(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		t.Run("the dry-run plan says what is retried and what is skipped, and why", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			b.entry(t, "f1", audit.StatusFailed)
			b.entry(t, "f2", audit.StatusFailed)
			pruned, _ := b.entry(t, "f3", audit.StatusFailed)
			b.n8n.prune(pruned)
			ok, _ := b.entry(t, "f4", audit.StatusFailed)
			b.n8n.set(ok, "success", "")
			b.entry(t, "p1", audit.StatusProcessing)
			b.entry(t, "c1", audit.StatusCancelled)
			b.entry(t, "d1", audit.StatusDone)
			p, err := b.r.Plan(ctx, retries.Filter{Source: "shop"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range p.Entries {
				got[e.EventID] = e.Reason
				if e.Retry {
					got[e.EventID] = "retry"
				}
			}
			want := map[string]string{"f1": "retry", "f2": "retry", "f3": retries.ReasonPruned, "f4": retries.ReasonNoFailed,
				"p1": "processing", "c1": "cancelled"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("plan %v, want %v", got, want)
			}
			if p.Retries != 2 || p.Done != 1 || p.Skipped["processing"] != 1 {
				t.Errorf("plan counts: %d retries, %d done, skipped %v", p.Retries, p.Done, p.Skipped)
			}
			if b.n8n.totalRetries() != 0 {
				t.Error("a dry run sent a retry")
			}
			// A list of events names done ones too.
			p, err = b.r.Plan(ctx, retries.Filter{Events: []retries.Ref{{Source: "shop", EventID: "d1"},
				{Source: "shop", EventID: "nope"}}})
			if err != nil || len(p.Entries) != 2 || p.Entries[0].Reason != "done" || p.Entries[1].Reason != retries.ReasonNotFound {
				t.Errorf("plan of a list: %+v %v", p.Entries, err)
			}
			// A time range that selects nothing.
			from := time.Now().Add(time.Hour)
			p, err = b.r.Plan(ctx, retries.Filter{From: &from})
			if err != nil || len(p.Entries) != 0 {
				t.Errorf("a range in the future: %+v %v", p.Entries, err)
			}
		})
		t.Run("bad filters are refused naming the field", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			from, to := time.Now(), time.Now().Add(-time.Hour)
			for _, f := range []struct {
				filter retries.Filter
				field  string
			}{
				{retries.Filter{}, "filter"},
				{retries.Filter{From: &from, To: &to}, "to"},
				{retries.Filter{Source: "shop", Events: []retries.Ref{{Source: "shop", EventID: "x"}}}, "events"},
				{retries.Filter{Events: []retries.Ref{{Source: "shop"}}}, "events[0].event_id"},
			} {
				_, err := b.r.Plan(ctx, f.filter)
				var e *audit.Error
				if !errors.As(err, &e) || e.Code != audit.CodeInvalid || e.Fields[f.field] == "" {
					t.Errorf("%+v: %v, want a problem with %s", f.filter, err, f.field)
				}
			}
		})
		t.Run("a run sends each planned retry once, at the bounded rate, and sums up", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{Rate: 600, InFlight: 1}) // one every 100 ms
			for i := range 5 {
				id := fmt.Sprintf("r%d", i)
				b.entry(t, id, audit.StatusFailed)
			}
			b.entry(t, "rp", audit.StatusProcessing)
			b.n8n.onRetry = func(newID, of string) string {
				// The Retry reports done for the event its holder held.
				for i := range 5 {
					id := fmt.Sprintf("r%d", i)
					if b.event(t, id).Holder == of {
						return b.reportAs(t, "shop", id)(newID, of)
					}
				}
				return "error"
			}
			start := time.Now()
			run, err := b.r.Start(ctx, retries.Filter{Source: "shop"}, bob)
			if err != nil {
				t.Fatal(err)
			}
			run = waitRun(t, b.r, run.ID, retries.Run.Done)
			if took := time.Since(start); took < 400*time.Millisecond {
				t.Errorf("5 retries at 600 a minute took %s, want at least 400 ms", took)
			}
			if run.State != "finished" || run.Counts["succeeded"] != 5 || run.Counts["skipped"] != 1 {
				t.Errorf("run %s: %v", run.State, run.Counts)
			}
			if !strings.Contains(run.Summary(), "5 retried (5 succeeded") {
				t.Errorf("summary %q", run.Summary())
			}
			for i := range 5 {
				id := fmt.Sprintf("r%d", i)
				if d := b.event(t, id); d.Status != audit.StatusDone {
					t.Errorf("%s is %s", id, d.Status)
				}
			}
			if n := b.n8n.totalRetries(); n != 5 {
				t.Errorf("n8n was asked %d times, want 5", n)
			}
			// Who did what: the run in the log, and each retry as its
			// entry's history line.
			for action, want := range map[string]int{"bulk_retry:started": 1, "retry": 5} {
				page, err := people.Read(ctx, b.st, people.LogFilter{Action: action, Actor: "bob"})
				if err != nil || len(page.Entries) != want || page.Entries[0].Via != "api" {
					t.Errorf("the log's %s: %+v %v", action, page.Entries, err)
				}
			}
		})
		t.Run("a cancelled run stops sending: what was planned is cancelled", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{Rate: 6000, InFlight: 1})
			for i := range 5 {
				b.entry(t, fmt.Sprintf("c%d", i), audit.StatusFailed)
			}
			b.n8n.hold = make(chan struct{}) // the first retry waits: the run can send nothing else
			run, err := b.r.Start(ctx, retries.Filter{Source: "shop"}, bob)
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, b.r, run.ID, func(r retries.Run) bool { return b.n8n.totalRetries() == 1 })
			run, err = b.r.Cancel(ctx, run.ID, retries.Who{Name: "carol", Via: "api"})
			if err != nil {
				t.Fatal(err)
			}
			b.n8n.release()
			run = waitRun(t, b.r, run.ID, func(r retries.Run) bool { return r.Counts["sending"] == 0 })
			if run.State != "cancelled" || run.CancelledBy != "carol" || run.Counts["cancelled"] != 4 || run.Counts["succeeded"] != 1 {
				t.Errorf("run %s by %q: %v", run.State, run.CancelledBy, run.Counts)
			}
			if n := b.n8n.totalRetries(); n != 1 {
				t.Errorf("n8n was asked %d times, want once (before the cancel)", n)
			}
			if _, err := b.r.Cancel(ctx, run.ID, retries.Who{Name: "carol", Via: "api"}); audit.ErrorCode(err) != audit.CodeConflict {
				t.Errorf("a second cancel: %v", err)
			}
			// Retention forgets an ended run with its items.
			if n, err := b.r.Prune(ctx, time.Now().Add(time.Hour)); err != nil || n != 5 {
				t.Errorf("pruned %d items: %v", n, err)
			}
			if _, err := b.r.Get(ctx, run.ID); audit.ErrorCode(err) != audit.CodeNotFound {
				t.Errorf("a pruned run: %v", err)
			}
		})
		t.Run("an entry changed since the plan is skipped, not sent", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{Rate: 6000, InFlight: 1})
			b.entry(t, "s0", audit.StatusFailed)
			_, v1 := b.entry(t, "s1", audit.StatusFailed)
			b.n8n.hold = make(chan struct{}) // the first retry waits
			run, err := b.r.Start(ctx, retries.Filter{Events: []retries.Ref{{Source: "shop", EventID: "s0"},
				{Source: "shop", EventID: "s1", Version: v1}}}, bob)
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, b.r, run.ID, func(r retries.Run) bool { return b.n8n.totalRetries() == 1 })
			if _, err := b.st.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "s1", To: audit.StatusCancelled,
				Actor: "ann", Note: "a test order", Version: v1}); err != nil {
				t.Fatal(err)
			}
			b.n8n.mu.Lock()
			close(b.n8n.hold)
			b.n8n.hold = nil
			b.n8n.mu.Unlock()
			run = waitRun(t, b.r, run.ID, retries.Run.Done)
			last := run.Items[len(run.Items)-1]
			if last.State != "refused" || !strings.Contains(last.Reason, "changed since the plan") {
				t.Errorf("s1: %s %q", last.State, last.Reason)
			}
			if n := b.n8n.totalRetries(); n != 1 {
				t.Errorf("n8n was asked %d times, want once", n)
			}
			// A stale version in a request is refused before anything starts.
			_, err = b.r.Start(ctx, retries.Filter{Events: []retries.Ref{{Source: "shop", EventID: "s1", Version: v1}}}, bob)
			refusal(t, err, retries.ReasonNoFailed)
		})
		t.Run("a run its instance left is resumed by another: what was being sent is not sent again", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{Rate: 60, InFlight: 1, Owner: "a"})
			for i := range 3 {
				b.entry(t, fmt.Sprintf("i%d", i), audit.StatusFailed)
			}
			b.n8n.hold = make(chan struct{})
			actx, stop := context.WithCancel(context.Background())
			b.r.Base(actx) // the runs it starts end with it, as under Watch
			run, err := b.r.Start(ctx, retries.Filter{Source: "shop"}, bob)
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, b.r, run.ID, func(r retries.Run) bool { return b.n8n.totalRetries() == 1 })
			stop() // instance a stops; its first retry still waits for n8n
			b.n8n.mu.Lock()
			held := b.n8n.hold
			b.n8n.hold = nil // the retries sent from now on are answered
			b.n8n.mu.Unlock()
			later := retries.New(retries.Config{Store: b.st, N8N: b.r.N8NForTest(), Owner: "b", Rate: 6000,
				Now: func() time.Time { return time.Now().Add(10 * time.Minute) }}) // past staleAfter
			if err := later.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			run = waitRun(t, later, run.ID, retries.Run.Done)
			// The stopped instance's retry is marked unknown by the adopter,
			// or not answered by its own stopping: never sent again.
			if run.State != "finished" || run.Counts["unknown"]+run.Counts["no_answer"] != 1 || run.Counts["succeeded"] != 2 {
				t.Errorf("resumed run %s: %v", run.State, run.Counts)
			}
			close(held)
			if n := b.n8n.totalRetries(); n != 3 {
				t.Errorf("n8n was asked %d times, want 3 (one each)", n)
			}
		})
	})
}
