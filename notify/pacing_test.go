package notify_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/notify"
)

// twoInstances returns a rig and workers of two instances on its database,
// perInstance each, with interval between two messages to one channel.
func twoInstances(t *testing.T, dialect string, perInstance int, interval time.Duration) (*rig, []*notify.Worker) {
	t.Helper()
	r, url := newRigURL(t, dialect)
	b := r.instance(t, url)
	var workers []*notify.Worker
	for i, s := range []*store.Store{r.store, b} {
		for j := 0; j < perInstance; j++ {
			w := r.newWorker(t, s, false, fmt.Sprintf("instance-%d/worker-%d", i+1, j+1))
			w.MinInterval = interval
			workers = append(workers, w)
		}
	}
	return r, workers
}

// TestPacingIsShared: two instances with two workers each keep together to
// one message per interval in a channel, not one per interval each.
func TestPacingIsShared(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		const alerts, interval = 8, 500 * time.Millisecond
		r, workers := twoInstances(t, dialect, 2, interval)
		for i := range alerts {
			r.unknown(t, fmt.Sprintf("order-%02d", i))
		}
		stop := running(t, workers...)
		waitFor(t, alerts*(interval+r.timeout), "every alert is sent", func() bool { return r.open(t) == 0 })
		stop()
		posts := r.slack.posts()
		if len(posts) != alerts {
			t.Fatalf("%d posts for %d alerts", len(posts), alerts)
		}
		// The slots are claimed interval apart; a post reaches Slack some
		// time after its slot, so the first may be late by up to one
		// interval (the others only make the span longer).
		span := posts[len(posts)-1].At.Sub(posts[0].At)
		if min := (alerts - 2) * interval; span < min {
			t.Errorf("%d posts within %s: faster than one per %s (want a span of at least %s)", alerts, span, interval, min)
		}
	})
}

// TestRateLimitPausesTheChannel: a 429 with Retry-After: 3 stops every
// worker of every instance from calling Slack about that channel for 3 s.
func TestRateLimitPausesTheChannel(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r, workers := twoInstances(t, dialect, 2, time.Second)
		limited := false
		r.slack.setFail(func(c call) (int, map[string]string, string) {
			if c.Method == "chat.postMessage" && !limited {
				limited = true
				return 429, map[string]string{"Retry-After": "3"}, `{"ok":false,"error":"ratelimited"}`
			}
			return 0, nil, ""
		})
		const alerts = 4
		for i := range alerts {
			r.unknown(t, fmt.Sprintf("order-%02d", i))
		}
		stop := running(t, workers...)
		waitFor(t, 3*time.Second+alerts*(time.Second+r.timeout), "every alert is sent", func() bool { return r.open(t) == 0 })
		stop()
		calls := r.slack.all()
		if len(calls) < alerts+1 || calls[0].OK {
			t.Fatalf("calls = %+v", calls)
		}
		for _, c := range calls[1:] {
			if gap := c.At.Sub(calls[0].At); gap < 3*time.Second {
				t.Errorf("%s %s came %s after the 429", c.Method, c.Channel, gap)
			}
		}
		if len(r.slack.posts()) != alerts {
			t.Errorf("%d posts for %d alerts", len(r.slack.posts()), alerts)
		}
	})
}
