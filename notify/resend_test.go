package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
)

// TestResendAfterConfigChange: alerts of the last 24 hours that were not
// sent for want of a working configuration (none at all, then a revoked
// token) go out, oldest first, once the configuration is fixed and the
// worker starts again; older ones and other failures stay as they were.
func TestResendAfterConfigChange(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		ctx := context.Background()
		start := func(t *testing.T) int {
			t.Helper()
			n, err := r.worker.Resend(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r.drain(t)
			return n
		}
		sqlTime := func(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05.000000Z") }

		// No Slack: recorded, not sent; one of them long ago.
		r.worker.Notifier = nil
		r.unknown(t, "order-old")
		r.unknown(t, "order-1")
		r.unknown(t, "order-2")
		start(t)
		r.store.DB().MustExec(r.store.DB().Rebind(`UPDATE outbox SET created_at = ? WHERE event_id = 'order-old'`),
			sqlTime(r.clock.Now().Add(-25*time.Hour)))
		if got := r.states(t); got["unconfigured"] != 3 {
			t.Fatalf("states = %v", got)
		}

		// A token that Slack refuses: what was queued again dies again,
		// with a reason that a configuration change can cure.
		r.worker = r.newWorker(t, r.store, false, "worker-2")
		r.worker.Notifier = r.bot("xoxb-revoked")
		if n := start(t); n != 2 {
			t.Errorf("queued %d again for a new token, want 2", n)
		}
		r.unknown(t, "order-3")
		r.unknown(t, "order-other")
		r.drain(t)
		r.store.DB().MustExec(`UPDATE outbox SET last_error = 'the row''s alert does not decode' WHERE event_id = 'order-other'`)
		if got := r.states(t); got["dead"] != 4 || got["unconfigured"] != 1 {
			t.Fatalf("states = %v", got)
		}

		// The right token, and a restart.
		r.worker = r.newWorker(t, r.store, false, "worker-3")
		if n := start(t); n != 3 {
			t.Errorf("queued %d again after the fix, want 3", n)
		}
		var order []string
		for _, c := range r.slack.posts() {
			for _, ev := range []string{"order-1", "order-2", "order-3"} {
				if strings.Contains(c.Text, ev) {
					order = append(order, ev)
				}
			}
		}
		if strings.Join(order, ",") != "order-1,order-2,order-3" {
			t.Errorf("sent %v, want the three, oldest first", order)
		}
		var old, other string
		r.store.DB().Get(&old, `SELECT state FROM outbox WHERE event_id = 'order-old'`)
		r.store.DB().Get(&other, `SELECT state FROM outbox WHERE event_id = 'order-other'`)
		if old != audit.OutboxUnconfigured || other != audit.OutboxDead {
			t.Errorf("older than 24 h: %s, dead for another reason: %s", old, other)
		}

		// Another restart with the same configuration sends nothing again.
		r.worker = r.newWorker(t, r.store, false, "worker-4")
		if n := start(t); n != 0 || len(r.slack.posts()) != 3 {
			t.Errorf("a restart queued %d, %d posts", n, len(r.slack.posts()))
		}
	})
}
