package handlers

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

// The redelivery classes as the overview names them, in the order charts
// stack them.
var classNames = []struct {
	Class audit.Class
	Name  string
}{
	{audit.ClassDoubleStart, "n8n started twice"},
	{audit.ClassSenderRetry, "sender retried"},
	{audit.ClassParallelWorkflows, "another workflow"},
	{audit.ClassManualRetry, "Retry of another execution"},
}

// bucketCounts are the counts of one hour or day.
type bucketCounts struct {
	Start      time.Time             `json:"start"`
	First      int64                 `json:"first_deliveries"`
	Deliveries int64                 `json:"deliveries"`
	Stopped    map[audit.Class]int64 `json:"stopped"`
	Retries    int64                 `json:"retries_recognised"`
	Captures   int64                 `json:"captures_after_failed"`
	Outcomes   map[string]int64      `json:"outcomes"`
	Refused    int64                 `json:"refused_reports"`
	Resolved   int64                 `json:"resolved_by_a_person"`
}

// groupCounts are the counts of one source or workflow over the window.
type groupCounts struct {
	Source             string  `json:"source,omitempty"`
	WorkflowID         string  `json:"workflow_id,omitempty"`
	Events             int64   `json:"events"`
	Deliveries         int64   `json:"deliveries"`
	DeliveriesPerEvent float64 `json:"deliveries_per_event"`
	Stopped            int64   `json:"duplicates_stopped"`
	InReview           int     `json:"in_review"`
	ShareInReview      float64 `json:"share_in_review"`
}

// weekResolution is how long unknown outcomes waited for a person in a week;
// a week without resolutions has no median (null), not one of 0 s.
type weekResolution struct {
	Week          time.Time `json:"week"`
	N             int       `json:"resolutions"`
	MedianSeconds *float64  `json:"median_seconds"`
	P90Seconds    *float64  `json:"p90_seconds"`
}

// ageBucket counts the entries waiting for review for about so long.
type ageBucket struct {
	Label string        `json:"label"`
	Upto  time.Duration `json:"-"`
	N     int           `json:"n"`
}

// stats is the overview's numbers, for the page and for GET /v1/stats.
type stats struct {
	From        time.Time         `json:"from"`
	To          time.Time         `json:"to"`
	Source      string            `json:"source,omitempty"`
	Days        []bucketCounts    `json:"days"`
	Hours       []bucketCounts    `json:"hours"`
	Totals      bucketCounts      `json:"totals"`
	BySource    []groupCounts     `json:"by_source"`
	ByWorkflow  []groupCounts     `json:"by_workflow"`
	Waiting     int               `json:"waiting_for_review"`
	Ages        []ageBucket       `json:"review_ages"`
	Oldest      []audit.ReviewAge `json:"oldest_waiting"`
	Resolutions []weekResolution  `json:"time_to_resolution"`
	Alerts      map[string]int    `json:"alerts_by_state"`
	// AlertKinds counts the alerts of each kind in each outbox state.
	AlertKinds map[string]map[string]int `json:"alerts_by_kind"`
	byWeek     map[time.Time][]float64
}

var reviewAges = []ageBucket{
	{Label: "< 15m", Upto: 15 * time.Minute}, {Label: "15m–1h", Upto: time.Hour}, {Label: "1–4h", Upto: 4 * time.Hour},
	{Label: "4–24h", Upto: 24 * time.Hour}, {Label: "1–3d", Upto: 72 * time.Hour}, {Label: "> 3d"},
}

// buildStats turns the store's rollups into days, hours and groups.
func buildStats(o audit.Overview, source string, now time.Time) stats {
	st := stats{From: o.From, To: o.To, Source: source, Waiting: o.ReviewTotal, Alerts: map[string]int{},
		AlertKinds: map[string]map[string]int{}, byWeek: map[time.Time][]float64{}}
	st.Totals = newBucket(time.Time{})
	day0 := o.To.UTC().Truncate(24 * time.Hour).Add(-13 * 24 * time.Hour)
	for i := 0; i < 14; i++ {
		st.Days = append(st.Days, newBucket(day0.Add(time.Duration(i)*24*time.Hour)))
	}
	hour0 := o.To.UTC().Truncate(time.Hour).Add(-47 * time.Hour)
	for i := 0; i < 48; i++ {
		st.Hours = append(st.Hours, newBucket(hour0.Add(time.Duration(i)*time.Hour)))
	}
	sources, workflows := map[string]*groupCounts{}, map[string]*groupCounts{}
	group := func(m map[string]*groupCounts, key string, g groupCounts) *groupCounts {
		if m[key] == nil {
			m[key] = &g
		}
		return m[key]
	}
	inDays := func(c audit.Counter) {
		if d := int(c.Hour.UTC().Sub(day0) / (24 * time.Hour)); !c.Hour.UTC().Before(day0) && d < len(st.Days) {
			st.Days[d].add(c)
		}
	}
	for _, c := range o.Daily {
		inDays(c)
	}
	for _, c := range o.Hourly {
		inDays(c)
		if i := int(c.Hour.UTC().Sub(hour0) / time.Hour); !c.Hour.UTC().Before(hour0) && i < len(st.Hours) {
			st.Hours[i].add(c)
		}
	}
	for _, c := range o.Groups {
		if strings.HasPrefix(c.Metric, audit.MetricAlert) {
			continue // the alerts are counted from the outbox, by state
		}
		st.Totals.add(c)
		for _, g := range []*groupCounts{group(sources, c.Source, groupCounts{Source: c.Source}),
			group(workflows, c.WorkflowID, groupCounts{WorkflowID: c.WorkflowID})} {
			switch {
			case c.Metric == audit.MetricFirst:
				g.Events += c.N
			case c.Metric == audit.MetricDelivery:
				g.Deliveries += c.N
			case strings.HasPrefix(c.Metric, audit.MetricStopped):
				g.Stopped += c.N
			}
		}
	}
	for _, r := range o.InReview {
		group(sources, r.Source, groupCounts{Source: r.Source}).InReview += r.N
		group(workflows, r.WorkflowID, groupCounts{WorkflowID: r.WorkflowID}).InReview += r.N
	}
	st.BySource, st.ByWorkflow = sortedGroups(sources), sortedGroups(workflows)
	st.Ages = slices.Clone(reviewAges)
	for _, r := range o.Review {
		age := now.Sub(r.Since)
		for i := range st.Ages {
			if st.Ages[i].Upto == 0 || age < st.Ages[i].Upto {
				st.Ages[i].N++
				break
			}
		}
	}
	st.Oldest = o.Review[:min(10, len(o.Review))]
	for _, r := range o.Resolutions {
		st.byWeek[weekOf(r.At)] = append(st.byWeek[weekOf(r.At)], r.Seconds)
	}
	week := weekOf(o.To)
	for i := 7; i >= 0; i-- {
		w := week.Add(-time.Duration(i) * 7 * 24 * time.Hour)
		r := weekResolution{Week: w, N: len(st.byWeek[w])}
		if r.N > 0 {
			med, p90 := audit.Percentile(st.byWeek[w], 0.5), audit.Percentile(st.byWeek[w], 0.9)
			r.MedianSeconds, r.P90Seconds = &med, &p90
		}
		st.Resolutions = append(st.Resolutions, r)
	}
	for _, a := range o.Alerts {
		st.Alerts[a.State] += a.N
		if st.AlertKinds[a.Kind] == nil {
			st.AlertKinds[a.Kind] = map[string]int{}
		}
		st.AlertKinds[a.Kind][a.State] += a.N
	}
	return st
}

func newBucket(start time.Time) bucketCounts {
	return bucketCounts{Start: start, Stopped: map[audit.Class]int64{}, Outcomes: map[string]int64{}}
}

func (b *bucketCounts) add(c audit.Counter) {
	switch {
	case c.Metric == audit.MetricFirst:
		b.First += c.N
	case c.Metric == audit.MetricDelivery:
		b.Deliveries += c.N
	case c.Metric == audit.MetricRetry:
		b.Retries += c.N
	case c.Metric == audit.MetricCapture:
		b.Captures += c.N
	case c.Metric == audit.MetricRefused:
		b.Refused += c.N
	case c.Metric == audit.MetricResolved:
		b.Resolved += c.N
	case strings.HasPrefix(c.Metric, audit.MetricStopped):
		b.Stopped[audit.Class(strings.TrimPrefix(c.Metric, audit.MetricStopped))] += c.N
	case strings.HasPrefix(c.Metric, audit.MetricOutcome):
		b.Outcomes[strings.TrimPrefix(c.Metric, audit.MetricOutcome)] += c.N
	}
}

func sortedGroups(m map[string]*groupCounts) []groupCounts {
	out := make([]groupCounts, 0, len(m))
	for _, g := range m {
		if g.Events > 0 {
			g.DeliveriesPerEvent = float64(g.Deliveries) / float64(g.Events)
			g.ShareInReview = float64(g.InReview) / float64(g.Events)
		}
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b groupCounts) int {
		return cmp.Or(cmp.Compare(b.Stopped, a.Stopped), cmp.Compare(a.Source+a.WorkflowID, b.Source+b.WorkflowID))
	})
	return out
}

// weekOf returns the Monday 00:00 UTC that starts t's week.
func weekOf(t time.Time) time.Time {
	d := t.UTC().Truncate(24 * time.Hour)
	return d.Add(-time.Duration((int(d.Weekday())+6)%7) * 24 * time.Hour)
}

// statsFilter reads from, to and source from the query.
func statsFilter(c *gin.Context) (audit.StatsFilter, error) {
	f := audit.StatsFilter{Source: c.Query("source")}
	errs := audit.FieldErrors{}
	if f.Source != "" {
		if err := audit.ValidateKey(f.Source, "x"); err != nil {
			errs.Add("source", "must be 1 to 100 characters: letters, digits and . _ : -")
		}
	}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		v := c.Query(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs.Add(p.name, "must be a time such as 2026-12-01T00:00:00Z")
		}
		*p.t = t
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		errs.Add("from", "must be before to")
	}
	return f, errs.Err()
}

// getStats answers GET /v1/stats: the overview's numbers as JSON.
func (h *Handler) getStats(c *gin.Context) {
	f, err := statsFilter(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	o, err := h.store.Overview(c.Request.Context(), f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, buildStats(o, f.Source, h.cfg.Now()))
}
