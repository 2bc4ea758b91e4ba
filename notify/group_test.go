package notify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// triggerFailed records one failure of a polling trigger, as n8n reports
// it: every payload differs (n8n's timestamp), the workflow and node do not.
func triggerFailed(t *testing.T, s *store.Store, i int) {
	t.Helper()
	if _, err := s.RecordError(context.Background(), audit.N8NErrorReport{Kind: audit.N8NErrorTrigger,
		DedupeKey: fmt.Sprintf("sha256:%064d", i), WorkflowID: "wfPoll", WorkflowName: "Poll CRM orders",
		Node: "CRM Trigger", Mode: "trigger", Message: "connect ECONNREFUSED 10.0.0.7:443"}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupedErrors: 100 failures of one polling trigger in 10 minutes are
// one alert and one thread, with counted replies and a first message that
// says how many; after the repeat interval, a fresh alert.
func TestGroupedErrors(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		for i := range 100 {
			triggerFailed(t, r.store, i)
			r.drain(t)
			r.clock.Advance(6 * time.Second)
		}
		r.drainUntil(t, time.Minute, 5)

		var roots, replies []call
		var updates []call
		for _, c := range r.slack.ok() {
			switch {
			case c.Method == "chat.postMessage" && c.ThreadTS == "":
				roots = append(roots, c)
			case c.Method == "chat.postMessage":
				replies = append(replies, c)
			case c.Method == "chat.update":
				updates = append(updates, c)
			}
		}
		if len(roots) != 1 {
			t.Fatalf("%d first messages for 100 failures, want 1", len(roots))
		}
		root := roots[0]
		if want := "n8n error linked to no event: Poll CRM orders / CRM Trigger: failed once, at 09:00 (UTC): connect ECONNREFUSED 10.0.0.7:443"; root.Text != want {
			t.Errorf("the first message\n got %q\nwant %q", root.Text, want)
		}
		// One counted reply a minute at most, over ten minutes.
		if len(replies) == 0 || len(replies) > 11 {
			t.Errorf("%d replies in the thread, want 1 to 11", len(replies))
		}
		for _, c := range append(replies, updates...) {
			if c.ThreadTS != root.TS && c.TS != root.TS {
				t.Errorf("a message outside the thread: %+v", c)
			}
			if !strings.Contains(c.Text, "failed") || !strings.Contains(c.Text, "times since 09:00") {
				t.Errorf("not counted: %q", c.Text)
			}
		}
		var first, last time.Time
		r.store.DB().Get(&first, `SELECT received_at FROM n8n_errors ORDER BY id LIMIT 1`)
		r.store.DB().Get(&last, `SELECT received_at FROM n8n_errors ORDER BY id DESC LIMIT 1`)
		want := fmt.Sprintf("failed 100 times since %s, last %s (UTC)", first.UTC().Format("15:04"), last.UTC().Format("15:04"))
		if len(updates) == 0 || !strings.Contains(updates[len(updates)-1].Text, want) {
			t.Errorf("the first message is not brought up to %q: %d updates", want, len(updates))
		} else if !strings.Contains(updates[len(updates)-1].Blocks, `"text":"*`+want+`*"`) {
			t.Errorf("its blocks do not say %q:\n%s", want, updates[len(updates)-1].Blocks)
		}
		var rows int
		r.store.DB().Get(&rows, `SELECT count(*) FROM outbox`)
		t.Logf("100 failures: %d replies, %d updates of the first message, %d outbox rows", len(replies), len(updates), rows)
		if rows > 1+2*11 {
			t.Errorf("%d outbox rows for one group: repeats are not coalesced", rows)
		}

		r.clock.Advance(time.Hour) // the repeat interval is over
		triggerFailed(t, r.store, 100)
		r.drainUntil(t, time.Minute, 5)
		var fresh []call
		for _, c := range r.slack.posts() {
			if c.ThreadTS == "" {
				fresh = append(fresh, c)
			}
		}
		if len(fresh) != 2 || !strings.Contains(fresh[1].Text, "failed once") {
			t.Errorf("after the repeat interval: %d first messages, the last %q", len(fresh), fresh[len(fresh)-1].Text)
		}
	})
}

// TestGroupLinkedLater: an execution error that links to no event is held
// for a grace period; when its claim arrives meanwhile, its group counts it
// no more and says nothing, and the event's own alert tells of it.
func TestGroupLinkedLater(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		ctx := context.Background()
		if _, err := r.store.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:900",
			ExecutionID: "900", WorkflowID: "wf1", Node: "CRM", Mode: "webhook", Message: "timeout"}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "order-g", ExecutionID: "900",
			WorkflowID: "wf1"}); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(time.Minute)
		r.drainUntil(t, time.Minute, 3)
		for _, c := range r.slack.posts() {
			if strings.Contains(c.Text, "linked to no event") {
				t.Errorf("the group's alert went out: %q", c.Text)
			}
		}
		var skipped string
		r.store.DB().Get(&skipped, `SELECT last_error FROM outbox WHERE thread_key LIKE 'group:%' AND kind = 'alert'`)
		if !strings.Contains(skipped, "linked to an event") {
			t.Errorf("the group's alert: %q", skipped)
		}
	})
}
