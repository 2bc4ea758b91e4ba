package notify_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/notify"
)

// TestLookupThatCannotAnswer: a post's answer was lost, and the history
// lookup that should tell whether Slack has it fails for a reason that
// will not pass by itself. The alert is posted (with the metadata a later
// lookup finds) instead of being held back until it dead-letters, and the
// log says once what to fix; a lookup that fails for a while (a 500) is
// tried again, and the alert shows as held back once it waited too long.
func TestLookupThatCannotAnswer(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		// lostThenLookup hangs the first lost posts past the client's
		// timeout (Slack keeps them) and answers every history lookup with
		// answer.
		lostThenLookup := func(t *testing.T, lost int32, status int, answer string) *rig {
			r := newRig(t, dialect, false)
			r.timeout = 500 * time.Millisecond
			r.worker = r.newWorker(t, r.store, false, "worker-1")
			var hung atomic.Int32
			r.slack.setDelay(func(c call) time.Duration {
				if c.Method == "chat.postMessage" && hung.Add(1) <= lost {
					return r.timeout + time.Second
				}
				return 0
			})
			r.slack.setFail(func(c call) (int, map[string]string, string) {
				if c.Method == "conversations.history" {
					return status, nil, answer
				}
				return 0, nil, ""
			})
			return r
		}
		for _, tc := range []struct{ reason, fix string }{
			{"not_in_channel", "invite the bot into the channel"},
			{"channel_not_found", "check RETRYAUDIT_SLACK_CHANNEL"},
		} {
			t.Run(tc.reason+": posted, with a warning naming the fix", func(t *testing.T) {
				r := lostThenLookup(t, 2, 200, `{"ok":false,"error":"`+tc.reason+`"}`)
				r.unknown(t, "order-n1")
				r.unknown(t, "order-n2")
				r.drain(t) // the posts whose answers are lost
				r.drainUntil(t, 5*time.Second, 10)
				if got := r.states(t); got["sent"] != 2 {
					t.Fatalf("states %v: the alerts are held back", got)
				}
				posts := r.slack.posts()
				if len(r.slack.stored()) != 4 {
					t.Errorf("%d messages in the channel: want each alert's lost post and its repost", len(r.slack.stored()))
				}
				for _, p := range posts {
					var md struct {
						EventType string `json:"event_type"`
					}
					if json.Unmarshal([]byte(p.Metadata), &md); md.EventType != notify.MetadataEventType {
						t.Errorf("a post without the metadata a later lookup finds: %q", p.Metadata)
					}
				}
				logs := r.logs.String()
				if n := strings.Count(logs, "level=WARN msg=\"outbox: an attempt may have posted"); n != 1 || !strings.Contains(logs, tc.fix) {
					t.Errorf("%d warnings, want one naming the fix %q:\n%s", n, tc.fix, logs)
				}
			})
		}

		t.Run("invalid_auth: the post fails too and dead-letters as a configuration error", func(t *testing.T) {
			r := lostThenLookup(t, 1, 200, `{"ok":false,"error":"invalid_auth"}`)
			r.unknown(t, "order-a1")
			r.drain(t)
			r.slack.setFail(func(c call) (int, map[string]string, string) {
				return 200, nil, `{"ok":false,"error":"invalid_auth"}`
			})
			r.drainUntil(t, 5*time.Second, 10)
			var last string
			r.store.DB().Get(&last, `SELECT last_error FROM outbox`)
			if got := r.states(t); got["dead"] != 1 || !strings.HasPrefix(last, audit.DeadConfigPrefix) {
				t.Errorf("states %v, last error %q", got, last)
			}
			if !strings.Contains(r.logs.String(), "check RETRYAUDIT_SLACK_BOT_TOKEN") {
				t.Errorf("the log does not say what to fix:\n%s", r.logs.String())
			}
		})

		t.Run("a lookup failing for a while is tried again, and shows as held back", func(t *testing.T) {
			r := lostThenLookup(t, 1, 500, "down")
			ctx := context.Background()
			r.unknown(t, "order-h1")
			r.drain(t)
			for range 4 {
				r.clock.Advance(time.Minute)
				r.drain(t)
			}
			if got := r.states(t); got["pending"] != 1 {
				t.Fatalf("states %v", got)
			}
			st, err := r.store.Stats(ctx)
			if err != nil || st.HeldBack != 0 {
				t.Fatalf("held back after 4 minutes: %+v %v", st, err)
			}
			r.clock.Advance(audit.HeldBackAfter)
			st, err = r.store.Stats(ctx)
			if err != nil || st.HeldBack != 1 || !strings.Contains(st.HeldBackError, "500") {
				t.Errorf("held back after %s: %+v %v", audit.HeldBackAfter+4*time.Minute, st, err)
			}
		})
	})
}

// TestPermanentErrorLoggedOncePerInstance: the two workers of an instance
// share what they logged, so a dead-letter reason is one line per
// instance, not one per worker.
func TestPermanentErrorLoggedOncePerInstance(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		r.slack.setFail(func(c call) (int, map[string]string, string) {
			return 200, nil, `{"ok":false,"error":"channel_not_found"}`
		})
		shared := &notify.Once{}
		w1, w2 := r.newWorker(t, r.store, false, "a/1"), r.newWorker(t, r.store, false, "a/2")
		w1.Logged, w2.Logged = shared, shared
		for i, w := range []*notify.Worker{w1, w2, w1, w2} {
			r.unknown(t, "order-"+string(rune('a'+i)))
			if _, err := w.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if got := r.states(t); got["dead"] != 4 {
			t.Fatalf("states %v", got)
		}
		if n := strings.Count(r.logs.String(), "a message cannot be delivered"); n != 1 {
			t.Errorf("the reason is logged %d times by two workers of one instance:\n%s", n, r.logs.String())
		}
	})
}
