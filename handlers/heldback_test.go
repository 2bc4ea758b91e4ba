package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// TestHeldBackAlertShows: an alert that waits longer than
// audit.HeldBackAfter to reach Slack (here no worker sends it) is counted on
// /metrics and named on the overview, with what its last attempt met.
func TestHeldBackAlertShows(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Now())
		s := newServer(t, dialect, withUI, func(c *handlers.Config, o *store.Options) { o.Now = clock.Now })
		s.claim(t, claimBody("shop", "held-1", "1"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "held-1", "outcome": "unknown", "execution_id": "1"})
		ctx := context.Background()
		s.store.RefreshGauges(ctx)
		if v := s.scrape(t, "retryaudit_alerts_held_back"); v != 0 {
			t.Fatalf("held back at once: %v", v)
		}
		_, page := s.page(t, "GET", "/overview", "alice:"+alicePassword, nil)
		if strings.Contains(page, `class="problem"`) {
			t.Fatalf("the overview warns at once:\n%s", page)
		}
		if _, err := s.store.DB().Exec(`UPDATE outbox SET last_error = 'slack: not_in_channel' WHERE kind = 'alert'`); err != nil {
			t.Fatal(err)
		}
		clock.Advance(audit.HeldBackAfter + time.Minute)
		s.store.RefreshGauges(ctx)
		if v := s.scrape(t, "retryaudit_alerts_held_back"); v != 1 {
			t.Errorf("retryaudit_alerts_held_back = %v, want 1", v)
		}
		_, page = s.page(t, "GET", "/overview", "alice:"+alicePassword, nil)
		if !strings.Contains(page, "1 Slack message has waited more than 5m to be sent (the oldest for ") ||
			!strings.Contains(page, "slack: not_in_channel") {
			t.Errorf("the overview does not show the held-back alert:\n%s", page)
		}
	})
}
