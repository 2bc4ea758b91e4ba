package store

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/metrics"
)

// watch registers the gauges kept from the store's database: the outbox's
// depth and the age of its oldest row, and the review queue. A goroutine
// refreshes them every interval; a scrape only reads what it left, so that
// no scrape rate (/metrics needs no token) can make the database count more
// than once per interval.
func (s *Store) watch(m *metrics.Metrics, interval time.Duration) {
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
	heldBackDesc = prometheus.NewDesc("retryaudit_alerts_held_back",
		"Slack messages waiting longer than 5 minutes to be sent: a lookup or a post that keeps failing.", nil, nil)
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
	stats     audit.Stats
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
	for _, d := range []*prometheus.Desc{outboxDepthDesc, outboxAgeDesc, heldBackDesc, reviewDesc, dbUpDesc, gaugeAgeDesc, refreshesDesc} {
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
	ch <- prometheus.MustNewConstMetric(heldBackDesc, prometheus.GaugeValue, float64(snap.stats.HeldBack))
	ch <- prometheus.MustNewConstMetric(reviewDesc, prometheus.GaugeValue, float64(snap.stats.ReviewQueue))
}
