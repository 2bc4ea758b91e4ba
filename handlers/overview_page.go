package handlers

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

type overviewData struct {
	stats
	Daily, Hourly, Groups, Ages, Resolution, Alerts chart
	StoppedTotal                                    int64
	WorkflowGroups                                  []groupCounts
	AlertTable                                      chartTable // kind × state, with totals
}

// overviewPage shows in pictures what the ledger stopped and what waits for
// a person.
func (h *Handler) overviewPage(c *gin.Context) {
	f, err := statsFilter(c)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	o, err := h.store.Overview(c.Request.Context(), f)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	st := buildStats(o, f.Source, h.cfg.Now())
	d := overviewData{stats: st}
	for _, n := range st.Totals.Stopped {
		d.StoppedTotal += n
	}
	d.Daily = activityChart("daily", "Per day, last 14 days", "day", st.Days, "Jan 2")
	d.Hourly = activityChart("hourly", "Per hour, last 48 hours", "hour (UTC)", st.Hours, "15h")
	d.Groups = groupChart(st.ByWorkflow)
	d.Ages = agesChart(st.Ages)
	d.Resolution = resolutionChart(st.Resolutions)
	d.Alerts, d.AlertTable = alertsChart(st)
	v := view{Title: "Overview", Nav: "overview", Data: d}
	if now, err := h.store.Stats(c.Request.Context()); err == nil {
		v.Problem = now.HeldBackNote() // an alert nobody receives shows here
	}
	h.render(c, http.StatusOK, "overview", v)
}

// activityChart stacks, per bucket, first deliveries, the redeliveries
// stopped by why they happened, the Retries recognised and the captures.
func activityChart(id, title, xLabel string, buckets []bucketCounts, layout string) chart {
	labels := make([]string, len(buckets))
	ss := []series{{Name: "first deliveries", Class: "s1"}}
	for i, cn := range classNames {
		ss = append(ss, series{Name: "stopped: " + cn.Name, Class: "s" + strconv.Itoa(i+2)})
	}
	ss = append(ss, series{Name: "Retries recognised", Class: "s6"}, series{Name: "captures after failed", Class: "s7"})
	for i, b := range buckets {
		labels[i] = b.Start.Format(layout)
		ss[0].Values = append(ss[0].Values, float64(b.First))
		for j, cn := range classNames {
			ss[j+1].Values = append(ss[j+1].Values, float64(b.Stopped[cn.Class]))
		}
		ss[len(ss)-2].Values = append(ss[len(ss)-2].Values, float64(b.Retries))
		ss[len(ss)-1].Values = append(ss[len(ss)-1].Values, float64(b.Captures))
	}
	return stackedBars(id, title, xLabel, "deliveries", labels, ss)
}

func groupChart(groups []groupCounts) chart {
	groups = groups[:min(8, len(groups))]
	labels := make([]string, len(groups))
	first := series{Name: "events", Class: "s1"}
	stopped := series{Name: "duplicates stopped", Class: "s2"}
	for i, g := range groups {
		labels[i] = g.WorkflowID
		if labels[i] == "" {
			labels[i] = "(none)"
		}
		first.Values = append(first.Values, float64(g.Events))
		stopped.Values = append(stopped.Values, float64(g.Stopped))
	}
	return stackedBars("workflows", "Per workflow, last 14 days (most duplicates first)", "workflow", "deliveries",
		labels, []series{first, stopped})
}

func agesChart(ages []ageBucket) chart {
	labels := make([]string, len(ages))
	s := series{Name: "entries", Class: "s5"}
	for i, a := range ages {
		labels[i] = a.Label
		s.Values = append(s.Values, float64(a.N))
	}
	return stackedBars("ages", "Waiting for a person, by how long", "waiting for", "entries", labels, []series{s})
}

func resolutionChart(weeks []weekResolution) chart {
	labels := make([]string, len(weeks))
	med := series{Name: "median", Class: "s1"}
	p90 := series{Name: "90th percentile", Class: "s4"}
	for i, w := range weeks {
		labels[i] = w.Week.Format("Jan 2")
		med.Values = append(med.Values, seconds(w.MedianSeconds))
		p90.Values = append(p90.Values, seconds(w.P90Seconds))
	}
	return lines("resolution", "From unknown to a person's resolution, per week", "week of", "time waited",
		labels, []series{med, p90}, durationAxis(func(v float64) string {
			return audit.HumanDuration(time.Duration(v*float64(time.Second)), " ")
		}))
}

// seconds is a week's time to resolution for a chart: NaN, no data, for a
// week without resolutions.
func seconds(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

// alertStates are the columns of the alerts' chart and table: the outbox's
// states, pending and sending together as waiting.
var alertStates = []struct {
	name, class string
	states      []string
}{
	{"sent", "s3", []string{audit.OutboxSent}},
	{"waiting", "s6", []string{audit.OutboxPending, audit.OutboxSending}},
	{"dead", "s4", []string{audit.OutboxDead}},
	{"Slack not set up", "s8", []string{audit.OutboxUnconfigured}},
	{"skipped", "s7", []string{audit.OutboxSkipped}},
}

// alertKinds are the kinds of alert in the order the overview lists them,
// with names short enough for a chart's axis.
var alertKinds = []struct{ kind, name string }{
	{audit.AlertExecutionError, "run failed"},
	{audit.AlertUnknown, "unknown"},
	{audit.AlertStale, "stale"},
	{audit.AlertFingerprint, "fingerprint"},
	{audit.AlertUnlinkedError, "unlinked error"},
}

// alertsChart stacks, per kind of alert, how many are sent, waiting, dead
// or were never sent; the table has the same numbers by the kinds' names in
// /v1/stats (in words), with totals.
func alertsChart(st stats) (chart, chartTable) {
	var kinds, labels []string
	for _, k := range alertKinds {
		kinds, labels = append(kinds, k.kind), append(labels, k.name)
	}
	var others []string
	for k := range st.AlertKinds {
		if !slices.Contains(kinds, k) {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	kinds, labels = append(kinds, others...), append(labels, others...)
	ss := make([]series, len(alertStates))
	for j, as := range alertStates {
		ss[j] = series{Name: as.name, Class: as.class}
	}
	table := chartTable{Head: append(append([]string{"kind"}, names(ss)...), "all")}
	totals := make([]int, len(alertStates)+1)
	for _, k := range kinds {
		row := []string{strings.ReplaceAll(k, "_", " ")}
		all := 0
		for j, as := range alertStates {
			n := 0
			for _, state := range as.states {
				n += st.AlertKinds[k][state]
			}
			ss[j].Values = append(ss[j].Values, float64(n))
			row = append(row, strconv.Itoa(n))
			all += n
			totals[j] += n
		}
		totals[len(alertStates)] += all
		table.Rows = append(table.Rows, append(row, strconv.Itoa(all)))
	}
	row := []string{"all"}
	for _, n := range totals {
		row = append(row, strconv.Itoa(n))
	}
	table.Rows = append(table.Rows, row)
	return stackedBars("alerts", "Alerts opened in the last 14 days, by kind and state", "kind", "alerts", labels, ss), table
}
