package audit

import (
	"slices"
	"time"
)

// The metrics kept per hour, source and workflow. A claim counts once per
// execution (a resend within one execution counts nothing).
const (
	MetricDelivery = "delivery" // an execution presented the key
	MetricFirst    = "first"    // a first delivery
	MetricStopped  = "stopped." // + class: a redelivery told not to act
	MetricRetry    = "retry"    // a Retry recognised and told to act
	MetricCapture  = "capture"  // a delivery captured a failed entry
	MetricOutcome  = "outcome." // + outcome: a report that moved the entry
	MetricRefused  = "refused"  // a report refused: its execution does not hold the entry
	MetricResolved = "resolved" // a person resolved an entry
	MetricAlert    = "alert."   // + kind: an alert that opens a thread
	StatsShards    = 16         // rows per counter: concurrent writers rarely meet
	StatsWindow    = 14 * 24 * time.Hour
)

// StatsFilter selects the overview's numbers. Zero values: the last 14 days,
// every source.
type StatsFilter struct {
	From, To time.Time
	Source   string
}

// Counter is one metric's count: for an hour or a day (Hour), or for a
// source and a workflow over the window (Hour zero).
type Counter struct {
	Hour       time.Time `db:"hour" json:"hour"`
	Source     string    `db:"source" json:"source"`
	WorkflowID string    `db:"workflow_id" json:"workflow_id"`
	Metric     string    `db:"metric" json:"metric"`
	N          int64     `db:"n" json:"n"`
}

// ReviewAge is an entry waiting for a person, for the overview's queue.
type ReviewAge struct {
	EventKey
	Reason string    `json:"review_reason"`
	Since  time.Time `json:"since"`
}

// Resolution is how long one unknown outcome waited for a person.
type Resolution struct {
	At      time.Time `db:"resolved_at" json:"resolved_at"`
	Source  string    `db:"source" json:"source"`
	Seconds float64   `db:"seconds" json:"seconds"`
}

// ReviewCount is how many entries of one source, held by one workflow's
// executions, wait for review.
type ReviewCount struct {
	Source     string `db:"source" json:"source"`
	WorkflowID string `db:"workflow_id" json:"workflow_id"`
	N          int    `db:"n" json:"n"`
}

// AlertCount counts the alerts (first messages of a thread) of one kind in
// one state.
type AlertCount struct {
	Kind  string `db:"alert_kind" json:"kind"`
	State string `db:"state" json:"state"`
	N     int    `db:"n" json:"n"`
}

// Overview is every number the overview page and /v1/stats show.
type Overview struct {
	From, To    time.Time
	Hourly      []Counter    // per hour and metric, for the hours not folded into days yet
	Daily       []Counter    // per day and metric
	Groups      []Counter    // per source, workflow and metric over the window
	Review      []ReviewAge  // everything waiting, oldest first (at most 1,000)
	ReviewTotal int          // how many wait
	Resolutions []Resolution // in the window, oldest first
	Alerts      []AlertCount // alerts opened in the window, by kind and state
	InReview    []ReviewCount
}

// Percentile returns the p-th percentile (0–1) of vs, by nearest rank; 0
// for none.
func Percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	sorted := slices.Clone(vs)
	slices.Sort(sorted)
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
