package handlers_test

import (
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/handlers"
)

// seedHistory plays a scripted week: on given days so many first
// deliveries, duplicates of each class, a capture after failed, a Retry and
// a person's resolution.
func seedHistory(t *testing.T, s *server, clock *audittest.Clock) {
	t.Helper()
	body := func(event, execution, delivery, workflow string) map[string]any {
		b := claimBody("shop", event, execution)
		if delivery != "" {
			b["delivery_id"] = delivery
		}
		if workflow != "" {
			b["workflow_id"] = workflow
		}
		return b
	}
	// Dec 1: two events; n8n starts one twice, the sender retries the other.
	clock.Advance(-46 * time.Hour) // 2026-12-01 10:00
	s.claim(t, body("e1", "x1", "d-1", ""))
	clock.Advance(50 * time.Millisecond)
	if out := s.claim(t, body("e1", "x2", "d-1", "")); out["redelivery_class"] != "n8n_double_start" {
		t.Fatalf("x2 = %v", out)
	}
	s.claim(t, body("e2", "x3", "d-2", ""))
	clock.Advance(time.Minute)
	if out := s.claim(t, body("e2", "x4", "d-9", "")); out["redelivery_class"] != "sender_retry" {
		t.Fatalf("x4 = %v", out)
	}
	// Dec 2: an old workflow version presents e3; e3 fails and is
	// captured; its outcome is unknown and a person resolves it 2 h later.
	clock.Advance(23 * time.Hour) // 2026-12-02 09:01
	s.claim(t, body("e3", "x5", "", ""))
	if out := s.claim(t, body("e3", "x6", "", "wf-old")); out["redelivery_class"] != "parallel_workflows" {
		t.Fatalf("x6 = %v", out)
	}
	s.outcome(t, outcomeBody("e3", "x5", "failed"))
	if out := s.claim(t, body("e3", "x7", "", "")); out["redelivery_class"] != "after_failure" {
		t.Fatalf("x7 = %v", out)
	}
	s.outcome(t, outcomeBody("e3", "x7", "unknown"))
	clock.Advance(2 * time.Hour)
	if _, err := s.store.Resolve(t.Context(), audit.ResolveRequest{Source: "shop", EventID: "e3", To: audit.StatusDone,
		Actor: "alice", Note: "in the CRM", Holder: "x7"}); err != nil {
		t.Fatal(err)
	}
	// Dec 3: a new event, and a Retry of its execution that re-runs the claim.
	clock.Advance(24 * time.Hour) // 2026-12-03 11:01
	s.claim(t, body("e4", "x8", "", ""))
	if out := s.claim(t, body("e4", "x9", "", "")); out["redelivery_class"] != "manual_retry" || out["process"] != true {
		t.Fatalf("x9 = %v", out)
	}
	s.claim(t, body("e5", "x10", "", ""))
	s.outcome(t, outcomeBody("e5", "x10", "unknown"))
}

func TestOverview(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
		n8n := newFakeLookup()
		n8n.add("x9", "retry", "x8")
		s := newServer(t, dialect, withUI, withLookup(n8n), func(c *handlers.Config, o *audit.Options) {
			c.Now, o.Now = clock.Now, clock.Now
		})
		seedHistory(t, s, clock)

		code, st := s.call(t, "GET", "/v1/stats", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /v1/stats: %d %v", code, st)
		}
		days := st["days"].([]any)
		if len(days) != 14 {
			t.Fatalf("%d days, want 14", len(days))
		}
		day := func(back int) map[string]any { return days[len(days)-1-back].(map[string]any) }
		stopped := func(d map[string]any, class string) any { return d["stopped"].(map[string]any)[class] }
		checks := []struct {
			name      string
			got, want any
		}{
			{"Dec 1 first deliveries", day(2)["first_deliveries"], 2.0},
			{"Dec 1 stopped: n8n started twice", stopped(day(2), "n8n_double_start"), 1.0},
			{"Dec 1 stopped: sender retried", stopped(day(2), "sender_retry"), 1.0},
			{"Dec 2 first deliveries", day(1)["first_deliveries"], 1.0},
			{"Dec 2 stopped: another workflow", stopped(day(1), "parallel_workflows"), 1.0},
			{"Dec 2 captures after failed", day(1)["captures_after_failed"], 1.0},
			{"Dec 2 resolutions", day(1)["resolved_by_a_person"], 1.0},
			{"Dec 3 first deliveries", day(0)["first_deliveries"], 2.0},
			{"Dec 3 Retries recognised", day(0)["retries_recognised"], 1.0},
			{"Dec 3 deliveries", day(0)["deliveries"], 3.0},
			// e1 and e2 have had no outcome for two days; e5's is unknown.
			{"waiting for review", st["waiting_for_review"], 3.0},
			{"the day before is empty", day(3)["first_deliveries"], 0.0},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		var week map[string]any
		for _, w := range st["time_to_resolution"].([]any) {
			if m := w.(map[string]any); m["resolutions"] == 1.0 {
				week = m
			}
		}
		if week == nil || week["median_seconds"] != 7200.0 || week["p90_seconds"] != 7200.0 ||
			!strings.HasPrefix(week["week"].(string), "2026-11-30") {
			t.Errorf("time to resolution = %v", st["time_to_resolution"])
		}
		src := st["by_source"].([]any)[0].(map[string]any)
		if src["source"] != "shop" || src["events"] != 5.0 || src["duplicates_stopped"] != 3.0 || src["in_review"] != 3.0 ||
			src["deliveries_per_event"] != 2.0 {
			t.Errorf("by source = %v", src)
		}
		if n := st["alerts_by_state"].(map[string]any)["pending"]; n == nil || n.(float64) < 1 {
			t.Errorf("alerts by state = %v", st["alerts_by_state"])
		}

		t.Run("folding hours into days changes no number", func(t *testing.T) {
			for i := 0; i < 2; i++ {
				if err := s.store.CompactStats(t.Context()); err != nil {
					t.Fatal(err)
				}
				_, again := s.call(t, "GET", "/v1/stats", nil)
				for _, k := range []string{"days", "totals", "by_source", "by_workflow"} {
					if !reflect.DeepEqual(again[k], st[k]) {
						t.Errorf("after compaction %d, %s = %v, was %v", i+1, k, again[k], st[k])
					}
				}
			}
			var hours []time.Time
			if err := s.store.DB().Select(&hours, `SELECT hour FROM stats_hourly WHERE shard <> 0`); err != nil {
				t.Fatal(err)
			}
			for _, h := range hours {
				if !h.Equal(clock.Now().Truncate(time.Hour)) {
					t.Errorf("a sharded row of %s is left; only the current hour may have them", h)
				}
			}
		})

		t.Run("filters narrow and bad filters are refused", func(t *testing.T) {
			code, out := s.call(t, "GET", "/v1/stats?source=other", nil)
			if code != http.StatusOK || out["by_source"] != nil && len(out["by_source"].([]any)) != 0 {
				t.Errorf("another source: %d %v", code, out["by_source"])
			}
			code, out = s.call(t, "GET", "/v1/stats?from=2026-12-02T00:00:00Z&to=2026-12-02T23:59:59Z", nil)
			if code != http.StatusOK || out["totals"].(map[string]any)["first_deliveries"] != 1.0 {
				t.Errorf("one day: %d %v", code, out["totals"])
			}
			for _, q := range []string{"from=yesterday", "source=a%20b", "from=2026-12-03T00:00:00Z&to=2026-12-01T00:00:00Z"} {
				if code, out := s.call(t, "GET", "/v1/stats?"+q, nil); code != http.StatusUnprocessableEntity {
					t.Errorf("%s: %d %v", q, code, out)
				}
			}
		})

		t.Run("the page draws every chart with its numbers", func(t *testing.T) {
			resp, page := s.page(t, "GET", "/overview", "alice:"+alicePassword, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /overview: %d\n%s", resp.StatusCode, page)
			}
			for _, id := range []string{"daily", "hourly", "workflows", "ages", "resolution", "alerts"} {
				fig := regexp.MustCompile(`(?s)<figure class="chart" id="` + id + `">.*?</figure>`).FindString(page)
				if fig == "" {
					t.Errorf("no chart %s", id)
					continue
				}
				if !strings.Contains(fig, "<svg") || !strings.Contains(fig, "<details>") ||
					!(strings.Contains(fig, "<rect class=") || strings.Contains(fig, "<polyline")) {
					t.Errorf("chart %s has no bars or lines, or no table:\n%s", id, fig)
				}
			}
			nav := regexp.MustCompile(`(?s)<nav>.*?</nav>`).FindString(page)
			if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(nav, "<nav>")), `<a href="/overview"`) {
				t.Error("Overview is not first in the navigation")
			}
			if !strings.Contains(page, "shop / e5") {
				t.Error("the oldest waiting entry is not listed")
			}
		})
	})
}

// TestDeliveryWords: the event page says in words why each delivery
// happened.
func TestDeliveryWords(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		first := claimBody("shop", "w1", "1")
		first["delivery_id"] = "d-1"
		s.claim(t, first)
		again := claimBody("shop", "w1", "2")
		again["delivery_id"] = "d-1"
		s.claim(t, again)
		other := claimBody("shop", "w1", "3")
		other["workflow_id"] = "wf-old"
		s.claim(t, other)
		_, page := s.page(t, "GET", "/events/shop/w1", "alice:"+alicePassword, nil)
		for _, words := range []string{"n8n started a second execution for the same call",
			"another workflow received the same event"} {
			if !strings.Contains(page, words) {
				t.Errorf("the page does not say %q", words)
			}
		}
		_, ev := s.call(t, "GET", "/v1/events/shop/w1", nil)
		classes := map[string]bool{}
		for _, x := range ev["executions"].([]any) {
			if c, ok := x.(map[string]any)["redelivery_class"].(string); ok {
				classes[c] = true
			}
		}
		if !classes["n8n_double_start"] || !classes["parallel_workflows"] {
			t.Errorf("executions' classes = %v", classes)
		}
	})
}
