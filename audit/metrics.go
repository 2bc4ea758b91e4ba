package audit

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the service's Prometheus metrics, in a registry of their own.
// A nil *Metrics records nothing, so tests and commands can leave it out.
type Metrics struct {
	Registry      *prometheus.Registry
	claims        *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	errors        *prometheus.CounterVec
	alerts        *prometheus.CounterVec
	lookups       *prometheus.CounterVec
	lookupSeconds prometheus.Histogram
	batchSize     *prometheus.HistogramVec
	shedTotal     *prometheus.CounterVec
	skipped       *prometheus.CounterVec
	statements    *prometheus.HistogramVec
	// HTTP is observed by the handlers' middleware: route, method, status.
	HTTP *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them, with the Go runtime's
// and the process's.
func NewMetrics() *Metrics {
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
	m.Registry.MustRegister(m.claims, m.outcomes, m.errors, m.alerts, m.lookups, m.lookupSeconds, m.batchSize,
		m.shedTotal, m.skipped, m.statements, m.HTTP,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) batched(kind string, n int) {
	if m != nil {
		m.batchSize.WithLabelValues(kind).Observe(float64(n))
	}
}

// ran observes one database round trip.
func (m *Metrics) ran(op string, start time.Time) {
	if m != nil {
		m.statements.WithLabelValues(op).Observe(time.Since(start).Seconds())
	}
}

func (m *Metrics) shed(kind string) {
	if m != nil {
		m.shedTotal.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) claimed(r ClaimResult) {
	if m != nil {
		m.claims.WithLabelValues(string(r.Decision), string(r.Delivery), string(r.Class)).Inc()
	}
}

func (m *Metrics) reported(o Outcome, changed bool) {
	if m != nil {
		m.outcomes.WithLabelValues(string(o), strconv.FormatBool(changed)).Inc()
	}
}

func (m *Metrics) ingested(kind string) {
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

// watch registers the gauges kept from the store's database: the outbox's
// depth and the age of its oldest row, and the review queue. A goroutine
// refreshes them every interval; a scrape only reads what it left, so that
// no scrape rate (/metrics needs no token) can make the database count more
// than once per interval.
func (m *Metrics) watch(s *Store, interval time.Duration) {
	if m == nil {
		return
	}
	c := &storeCollector{s: s}
	s.gauges = c
	m.Registry.MustRegister(c)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.RefreshGauges(s.closing)
			select {
			case <-s.closing.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// RefreshGauges reads the gauges from the database now (the background
// refresh calls it; so can tests).
func (s *Store) RefreshGauges(ctx context.Context) {
	c := s.gauges
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := s.Stats(ctx)
	snap := &gaugeSnapshot{stats: st, up: err == nil, at: s.now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshes++
	snap.refreshes = c.refreshes
	if !snap.up && c.last != nil {
		snap.stats = c.last.stats // keep the last values; database_up says they are old
	}
	c.last = snap
}

var (
	outboxDepthDesc = prometheus.NewDesc("retryaudit_outbox_depth",
		"Outbox rows waiting to be sent.", nil, nil)
	outboxAgeDesc = prometheus.NewDesc("retryaudit_outbox_oldest_age_seconds",
		"Age of the oldest outbox row waiting to be sent (0 when none).", nil, nil)
	reviewDesc = prometheus.NewDesc("retryaudit_review_queue_size",
		"Entries waiting for a person.", nil, nil)
	dbUpDesc = prometheus.NewDesc("retryaudit_database_up",
		"1 when the database answered the last refresh of the gauges.", nil, nil)
	gaugeAgeDesc = prometheus.NewDesc("retryaudit_gauges_age_seconds",
		"Seconds since the gauges above were read from the database.", nil, nil)
	refreshesDesc = prometheus.NewDesc("retryaudit_gauge_refreshes_total",
		"Times the gauges were read from the database.", nil, nil)
)

// gaugeSnapshot is one reading of the database's gauges.
type gaugeSnapshot struct {
	stats     Stats
	up        bool
	at        time.Time
	refreshes int
}

type storeCollector struct {
	s         *Store
	mu        sync.Mutex
	last      *gaugeSnapshot
	refreshes int
}

// Describe sends the descriptions of the store's gauges.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{outboxDepthDesc, outboxAgeDesc, reviewDesc, dbUpDesc, gaugeAgeDesc, refreshesDesc} {
		ch <- d
	}
}

// Collect sends the last reading; it never touches the database.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	snap := c.last
	c.mu.Unlock()
	if snap == nil {
		ch <- prometheus.MustNewConstMetric(dbUpDesc, prometheus.GaugeValue, 0)
		return
	}
	up := 0.0
	if snap.up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(dbUpDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(gaugeAgeDesc, prometheus.GaugeValue, c.s.now().Sub(snap.at).Seconds())
	ch <- prometheus.MustNewConstMetric(refreshesDesc, prometheus.CounterValue, float64(snap.refreshes))
	ch <- prometheus.MustNewConstMetric(outboxDepthDesc, prometheus.GaugeValue, float64(snap.stats.OutboxDepth))
	ch <- prometheus.MustNewConstMetric(outboxAgeDesc, prometheus.GaugeValue, snap.stats.OutboxOldestAge.Seconds())
	ch <- prometheus.MustNewConstMetric(reviewDesc, prometheus.GaugeValue, float64(snap.stats.ReviewQueue))
}
