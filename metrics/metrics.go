// Package metrics holds the service's Prometheus metrics: the counters and
// histograms the store, the handlers and the n8n client record into, in a
// registry of their own. It knows nothing of the domain: callers pass plain
// label values, so the domain can record without importing Prometheus.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the service's Prometheus metrics, in a registry of their own.
// A nil *Metrics records nothing, so tests and commands can leave it out.
type Metrics struct {
	// Registry is what /metrics serves; the store registers its gauges here.
	Registry      *prometheus.Registry
	claims        *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	errors        *prometheus.CounterVec
	alerts        *prometheus.CounterVec
	lookups       *prometheus.CounterVec
	lookupSeconds prometheus.Histogram
	crmLookups    *prometheus.CounterVec
	crmSeconds    prometheus.Histogram
	retries       *prometheus.CounterVec
	batchSize     *prometheus.HistogramVec
	shedTotal     *prometheus.CounterVec
	skipped       *prometheus.CounterVec
	statements    *prometheus.HistogramVec
	// HTTP is observed by the handlers' middleware: route, method, status.
	HTTP *prometheus.HistogramVec
}

// New creates the metrics and registers them, with the Go runtime's and the
// process's.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_claims_total", Help: "Claims answered, by decision, kind of delivery and why a known key came again.",
		}, []string{"decision", "delivery", "class"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_outcomes_total", Help: "Outcome reports, by outcome and whether they changed the entry.",
		}, []string{"outcome", "changed"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_errors_ingested_total", Help: "n8n errors recorded, by kind (duplicates not counted).",
		}, []string{"kind"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_alerts_total", Help: "Outbox deliveries, by resulting state.",
		}, []string{"state"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_n8n_api_lookups_total", Help: "Calls to n8n's public API, by result.",
		}, []string{"result"}),
		lookupSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "retryaudit_n8n_api_lookup_duration_seconds", Help: "Latency of calls to n8n's public API.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		crmLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_crm_lookups_total", Help: "CRM lookups people ran, by source and answer (found, not_found, error, not_sent).",
		}, []string{"source", "result"}),
		crmSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "retryaudit_crm_lookup_duration_seconds", Help: "How long the CRM took to answer a lookup.",
			Buckets: []float64{.025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_retries_total",
			Help: "Retries asked of n8n for people, one or in bulk, by n8n's answer (succeeded, failed, refused, no_answer).",
		}, []string{"result"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "retryaudit_batch_size", Help: "Requests committed together in one transaction, by kind.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}, []string{"kind"}),
		shedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_shed_total", Help: "Requests answered 503 because the queue was full or they waited too long, by kind.",
		}, []string{"kind"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryaudit_reconcile_skipped_total",
			Help: "What a reconciliation pass could not read, by reason (a page is read again by the next pass).",
		}, []string{"reason"}),
		statements: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retryaudit_db_statement_duration_seconds",
			Help:    "Database statements (a round trip each), by what they do; begin and commit included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
		HTTP: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "retryaudit_http_request_duration_seconds", Help: "HTTP requests, by route, method and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method", "status"}),
	}
	m.Registry.MustRegister(m.claims, m.outcomes, m.errors, m.alerts, m.lookups, m.lookupSeconds, m.crmLookups,
		m.crmSeconds, m.retries, m.batchSize,
		m.shedTotal, m.skipped, m.statements, m.HTTP,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Batched observes how many requests of a kind one transaction committed.
func (m *Metrics) Batched(kind string, n int) {
	if m != nil {
		m.batchSize.WithLabelValues(kind).Observe(float64(n))
	}
}

// Ran observes one database round trip that began at start.
func (m *Metrics) Ran(op string, start time.Time) {
	if m != nil {
		m.statements.WithLabelValues(op).Observe(time.Since(start).Seconds())
	}
}

// Shed counts a request of a kind answered 503 under overload.
func (m *Metrics) Shed(kind string) {
	if m != nil {
		m.shedTotal.WithLabelValues(kind).Inc()
	}
}

// Claimed counts one claim answered: its decision, its kind of delivery and,
// for a known key, why it came again.
func (m *Metrics) Claimed(decision, delivery, class string) {
	if m != nil {
		m.claims.WithLabelValues(decision, delivery, class).Inc()
	}
}

// Reported counts one outcome report and whether it changed the entry.
func (m *Metrics) Reported(outcome string, changed bool) {
	if m != nil {
		m.outcomes.WithLabelValues(outcome, strconv.FormatBool(changed)).Inc()
	}
}

// Ingested counts one n8n error recorded, by kind.
func (m *Metrics) Ingested(kind string) {
	if m != nil {
		m.errors.WithLabelValues(kind).Inc()
	}
}

// Delivered counts an outbox row that reached a state.
func (m *Metrics) Delivered(state string) {
	if m != nil {
		m.alerts.WithLabelValues(state).Inc()
	}
}

// LookedUp counts one call to n8n's API and its latency.
func (m *Metrics) LookedUp(result string, took time.Duration) {
	if m != nil {
		m.lookups.WithLabelValues(result).Inc()
		m.lookupSeconds.Observe(took.Seconds())
	}
}

// ReconcileSkipped counts what a reconciliation pass could not read.
func (m *Metrics) ReconcileSkipped(reason string, n int) {
	if m != nil {
		m.skipped.WithLabelValues(reason).Add(float64(n))
	}
}

// CRMLookedUp counts one CRM lookup of a source, its answer (found,
// not_found, error, or not_sent when it found no free slot) and, when it
// was sent, how long the CRM took.
func (m *Metrics) CRMLookedUp(source, result string, took time.Duration) {
	if m != nil {
		m.crmLookups.WithLabelValues(source, result).Inc()
		if result != "not_sent" {
			m.crmSeconds.Observe(took.Seconds())
		}
	}
}

// Retried counts one retry asked of n8n, by n8n's answer.
func (m *Metrics) Retried(result string) {
	if m != nil {
		m.retries.WithLabelValues(result).Inc()
	}
}
