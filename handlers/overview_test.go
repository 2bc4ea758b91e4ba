package handlers_test

import (
	stdhtml "html"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
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
	retry := body("e4", "x9", "", "")
	retry["run_stamp"] = stampOf("x8") // n8n's Retry replays the stamp x8 made
	if out := s.claim(t, retry); out["redelivery_class"] != "manual_retry" || out["process"] != true {
		t.Fatalf("x9 = %v", out)
	}
	s.claim(t, body("e5", "x10", "", ""))
	s.outcome(t, outcomeBody("e5", "x10", "unknown"))
	// Slack took the oldest alert (e3's); e5's waits.
	rows, err := s.store.LeaseOutbox(t.Context(), "test", time.Minute, 1)
	if err != nil || len(rows) != 1 || rows[0].EventID != "e3" || rows[0].Kind != audit.RowAlert {
		t.Fatalf("lease the oldest alert: %v %+v", err, rows)
	}
	if ok, err := s.store.FinishOutbox(t.Context(), rows[0].ID, "test", audit.Attempt{State: audit.OutboxSent,
		Destination: "C1", MessageID: "1.1"}); !ok || err != nil {
		t.Fatalf("finish: %v %v", ok, err)
	}
}

func TestOverview(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
		n8n := newFakeLookup()
		n8n.add("x9", "retry", "x8")
		s := newServer(t, dialect, withUI, withLookup(n8n), func(c *handlers.Config, o *store.Options) {
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
			m := w.(map[string]any)
			if m["resolutions"] == 1.0 {
				week = m
			} else if m["median_seconds"] != nil || m["p90_seconds"] != nil {
				t.Errorf("a week without resolutions has times: %v", m)
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
		// The hours: e1 and e2 (Dec 1 10:00) are older than the 48 hours.
		hours := st["hours"].([]any)
		if len(hours) != 48 || !strings.HasPrefix(hours[0].(map[string]any)["start"].(string), "2026-12-01T12:00:00") {
			t.Fatalf("%d hours from %v, want 48 from Dec 1 12:00", len(hours), hours[0].(map[string]any)["start"])
		}
		type hourly struct {
			first, deliveries, retries, captures, resolved float64
			stopped, outcomes                              map[string]any
		}
		wantHours := map[string]hourly{
			"2026-12-02T09:00:00Z": {first: 1, deliveries: 3, captures: 1,
				stopped: map[string]any{"parallel_workflows": 1.0}, outcomes: map[string]any{"failed": 1.0, "unknown": 1.0}},
			"2026-12-02T11:00:00Z": {resolved: 1, stopped: map[string]any{}, outcomes: map[string]any{}},
			"2026-12-03T11:00:00Z": {first: 2, deliveries: 3, retries: 1,
				stopped: map[string]any{}, outcomes: map[string]any{"unknown": 1.0}},
		}
		for _, h := range hours {
			h := h.(map[string]any)
			want, ok := wantHours[h["start"].(string)]
			if !ok {
				want = hourly{stopped: map[string]any{}, outcomes: map[string]any{}}
			}
			got := hourly{first: h["first_deliveries"].(float64), deliveries: h["deliveries"].(float64),
				retries: h["retries_recognised"].(float64), captures: h["captures_after_failed"].(float64),
				resolved: h["resolved_by_a_person"].(float64), stopped: h["stopped"].(map[string]any),
				outcomes: h["outcomes"].(map[string]any)}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("hour %s = %+v, want %+v", h["start"], got, want)
			}
		}
		// Per workflow: wf1 ran everything but x6, which an old version (wf-old)
		// presented and which was stopped; e1, e2 and e5 wait in wf1.
		wantWorkflows := []any{
			map[string]any{"workflow_id": "wf1", "events": 5.0, "deliveries": 9.0, "deliveries_per_event": 1.8,
				"duplicates_stopped": 2.0, "in_review": 3.0, "share_in_review": 0.6},
			map[string]any{"workflow_id": "wf-old", "events": 0.0, "deliveries": 1.0, "deliveries_per_event": 0.0,
				"duplicates_stopped": 1.0, "in_review": 0.0, "share_in_review": 0.0},
		}
		if !reflect.DeepEqual(st["by_workflow"], wantWorkflows) {
			t.Errorf("by workflow = %v\nwant %v", st["by_workflow"], wantWorkflows)
		}
		// Two unknown outcomes (e3, e5) opened alerts; the first was sent.
		wantAlerts := map[string]any{"unknown_outcome": map[string]any{"sent": 1.0, "pending": 1.0}}
		if !reflect.DeepEqual(st["alerts_by_kind"], wantAlerts) {
			t.Errorf("alerts by kind = %v, want %v", st["alerts_by_kind"], wantAlerts)
		}
		if want := map[string]any{"sent": 1.0, "pending": 1.0}; !reflect.DeepEqual(st["alerts_by_state"], want) {
			t.Errorf("alerts by state = %v, want %v", st["alerts_by_state"], want)
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

		t.Run("the page draws every chart with the numbers of /v1/stats", func(t *testing.T) {
			resp, page := s.page(t, "GET", "/overview", "alice:"+alicePassword, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /overview: %d\n%s", resp.StatusCode, page)
			}
			for _, id := range []string{"daily", "hourly", "workflows", "ages", "resolution", "alerts"} {
				fig := figure(page, id)
				if fig == "" {
					t.Errorf("no chart %s", id)
					continue
				}
				if !strings.Contains(fig, "<svg") || !strings.Contains(fig, "<details>") ||
					!(strings.Contains(fig, "<rect class=") || strings.Contains(fig, "<polyline")) {
					t.Errorf("chart %s has no bars or lines, or no table:\n%s", id, fig)
				}
			}
			if n := len(regexp.MustCompile(`<figure class="chart"`).FindAllString(page, -1)); n != 6 {
				t.Errorf("%d charts, want 6", n)
			}
			nav := regexp.MustCompile(`(?s)<nav>.*?</nav>`).FindString(page)
			if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(nav, "<nav>")), `<a href="/overview"`) {
				t.Error("Overview is not first in the navigation")
			}
			if !strings.Contains(page, "shop / e5") {
				t.Error("the oldest waiting entry is not listed")
			}
			comparePage(t, page, st)
			// Seven weeks without resolutions are marked so, not drawn as 0 s.
			if n := strings.Count(figure(page, "resolution"), ">no data</text>"); n != 7 {
				t.Errorf("%d weeks marked no data, want 7", n)
			}
		})
	})
}

// figure returns the chart of the page with the id.
func figure(page, id string) string {
	return regexp.MustCompile(`(?s)<figure class="chart" id="` + id + `">.*?</figure>`).FindString(page)
}

var (
	tbodyRE = regexp.MustCompile(`(?s)<tbody>(.*?)</tbody>`)
	rowRE   = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	cellRE  = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
	tagRE   = regexp.MustCompile(`<[^>]*>`)
)

// tableCells returns the text of the body cells of the first table in html.
func tableCells(html string) [][]string {
	var rows [][]string
	for _, r := range rowRE.FindAllStringSubmatch(tbodyRE.FindString(html), -1) {
		var cells []string
		for _, c := range cellRE.FindAllStringSubmatch(r[1], -1) {
			cells = append(cells, strings.Join(strings.Fields(stdhtml.UnescapeString(tagRE.ReplaceAllString(c[1], ""))), " "))
		}
		rows = append(rows, cells)
	}
	return rows
}

// comparePage checks every number the overview page shows against the
// same numbers from GET /v1/stats: the big numbers, each chart's table, and
// the tables per source, per workflow and of the alerts.
func comparePage(t *testing.T, page string, st map[string]any) {
	t.Helper()
	n := func(v any) string { return strconv.FormatFloat(v.(float64), 'f', -1, 64) }
	m := func(v any) map[string]any { return v.(map[string]any) }
	list := func(v any) []any { l, _ := v.([]any); return l }
	check := func(what string, got, want [][]string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s on the page:\n%q\nin /v1/stats:\n%q", what, got, want)
		}
	}

	totals := m(st["totals"])
	stopped := 0.0
	for _, v := range m(totals["stopped"]) {
		stopped += v.(float64)
	}
	var big [][]string
	for _, li := range regexp.MustCompile(`(?s)<li><strong>(.*?)</strong>\s*(.*?)</li>`).FindAllStringSubmatch(
		regexp.MustCompile(`(?s)<ul class="big-numbers">.*?</ul>`).FindString(page), -1) {
		big = append(big, []string{tagRE.ReplaceAllString(li[1], ""), li[2]})
	}
	check("big numbers", big, [][]string{{n(totals["first_deliveries"]), "events"},
		{n(stopped), "duplicates stopped"}, {n(totals["retries_recognised"]), "Retries recognised"},
		{n(totals["captures_after_failed"]), "captures after failed"}, {n(st["waiting_for_review"]), "waiting for a person"}})

	activity := func(buckets []any, layout string) [][]string {
		var rows [][]string
		for _, b := range buckets {
			b := m(b)
			start, _ := time.Parse(time.RFC3339, b["start"].(string))
			row := []string{start.Format(layout), n(b["first_deliveries"])}
			for _, class := range []string{"n8n_double_start", "sender_retry", "parallel_workflows", "manual_retry"} {
				v, ok := m(b["stopped"])[class]
				if !ok {
					v = 0.0
				}
				row = append(row, n(v))
			}
			rows = append(rows, append(row, n(b["retries_recognised"]), n(b["captures_after_failed"])))
		}
		return rows
	}
	check("the days", tableCells(figure(page, "daily")), activity(list(st["days"]), "Jan 2"))
	check("the hours", tableCells(figure(page, "hourly")), activity(list(st["hours"]), "15h"))

	groups := func(key string, gs []any) [][]string {
		var rows [][]string
		for _, g := range gs {
			g := m(g)
			name := g[key].(string)
			if name == "" {
				name = "(none)"
			}
			rows = append(rows, []string{name, n(g["events"]), strconv.FormatFloat(g["deliveries_per_event"].(float64), 'f', 2, 64),
				n(g["duplicates_stopped"]), n(g["in_review"]) + " (" + strconv.FormatFloat(100*g["share_in_review"].(float64), 'f', 0, 64) + "%)"})
		}
		return rows
	}
	check("per source", tableCells(regexp.MustCompile(`(?s)<table id="by-source">.*?</table>`).FindString(page)),
		groups("source", list(st["by_source"])))
	check("per workflow", tableCells(regexp.MustCompile(`(?s)<table id="by-workflow">.*?</table>`).FindString(page)),
		groups("workflow_id", list(st["by_workflow"])))
	var wf [][]string
	for _, row := range groups("workflow_id", list(st["by_workflow"])) {
		wf = append(wf, []string{row[0], row[1], row[3]})
	}
	check("the workflows' chart", tableCells(figure(page, "workflows")), wf)

	var ages [][]string
	for _, a := range list(st["review_ages"]) {
		ages = append(ages, []string{m(a)["label"].(string), n(m(a)["n"])})
	}
	check("the review queue's ages", tableCells(figure(page, "ages")), ages)

	var weeks [][]string
	for _, w := range list(st["time_to_resolution"]) {
		w := m(w)
		start, _ := time.Parse(time.RFC3339, w["week"].(string))
		row := []string{start.Format("Jan 2")}
		for _, k := range []string{"median_seconds", "p90_seconds"} {
			if w[k] == nil {
				row = append(row, "no data")
			} else {
				row = append(row, audit.HumanDuration(time.Duration(w[k].(float64)*float64(time.Second)), " "))
			}
		}
		weeks = append(weeks, row)
	}
	check("the time to resolution", tableCells(figure(page, "resolution")), weeks)

	// The alerts: per kind, sent, waiting (pending and sending), dead, not
	// configured, skipped, all; the table by kind, the chart by short name.
	var alerts, bars [][]string
	all := make([]float64, 6)
	short := map[string]string{"execution_error": "run failed", "unknown_outcome": "unknown", "stale": "stale",
		"fingerprint_mismatch": "fingerprint", "unlinked_error": "unlinked error"}
	for _, kind := range []string{"execution_error", "unknown_outcome", "stale", "fingerprint_mismatch", "unlinked_error"} {
		states, _ := m(st["alerts_by_kind"])[kind].(map[string]any)
		get := func(state string) float64 { v, _ := states[state].(float64); return v }
		row := []float64{get("sent"), get("pending") + get("sending"), get("dead"), get("unconfigured"), get("skipped")}
		sum := 0.0
		cells := []string{strings.ReplaceAll(kind, "_", " ")}
		for i, v := range row {
			sum += v
			all[i] += v
			cells = append(cells, n(v))
		}
		all[5] += sum
		alerts = append(alerts, append(cells, n(sum)))
		bars = append(bars, append([]string{short[kind]}, cells[1:6]...))
	}
	total := []string{"all"}
	for _, v := range all {
		total = append(total, n(v))
	}
	check("the alerts", tableCells(regexp.MustCompile(`(?s)<table id="alerts-by-kind">.*?</table>`).FindString(page)),
		append(alerts, total))
	check("the alerts' chart", tableCells(figure(page, "alerts")), bars)
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
