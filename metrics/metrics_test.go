package metrics_test

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/retryaudit/retryaudit/metrics"
)

// sample finds the family's series whose labels are exactly labels.
func sample(t *testing.T, m *metrics.Metrics, family string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			if len(s.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range s.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			return s
		}
	}
	t.Fatalf("no %s%v among the gathered metrics", family, labels)
	return nil
}

// value is a counter's value or a histogram's count of observations.
func value(s *dto.Metric) float64 {
	if h := s.GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return s.GetCounter().GetValue()
}

func TestRecorders(t *testing.T) {
	tests := []struct {
		name   string
		record func(*metrics.Metrics)
		family string
		labels map[string]string
		want   float64
	}{
		{"a claim counts under its decision, delivery and class",
			func(m *metrics.Metrics) { m.Claimed("in_progress", "redelivery", "n8n_double_start") },
			"retryaudit_claims_total",
			map[string]string{"decision": "in_progress", "delivery": "redelivery", "class": "n8n_double_start"}, 1},
		{"a first claim has an empty class",
			func(m *metrics.Metrics) { m.Claimed("claimed", "first_delivery", "") },
			"retryaudit_claims_total",
			map[string]string{"decision": "claimed", "delivery": "first_delivery", "class": ""}, 1},
		{"an outcome that changed the entry says true",
			func(m *metrics.Metrics) { m.Reported("succeeded", true) },
			"retryaudit_outcomes_total", map[string]string{"outcome": "succeeded", "changed": "true"}, 1},
		{"an outcome that changed nothing says false",
			func(m *metrics.Metrics) { m.Reported("failed", false); m.Reported("failed", false) },
			"retryaudit_outcomes_total", map[string]string{"outcome": "failed", "changed": "false"}, 2},
		{"an ingested error counts by kind",
			func(m *metrics.Metrics) { m.Ingested("trigger_error") },
			"retryaudit_errors_ingested_total", map[string]string{"kind": "trigger_error"}, 1},
		{"a delivery counts by state",
			func(m *metrics.Metrics) { m.Delivered("sent") },
			"retryaudit_alerts_total", map[string]string{"state": "sent"}, 1},
		{"a lookup counts by result",
			func(m *metrics.Metrics) { m.LookedUp("found", time.Millisecond) },
			"retryaudit_n8n_api_lookups_total", map[string]string{"result": "found"}, 1},
		{"a lookup's latency is observed",
			func(m *metrics.Metrics) { m.LookedUp("error", time.Second); m.LookedUp("found", time.Millisecond) },
			"retryaudit_n8n_api_lookup_duration_seconds", map[string]string{}, 2},
		{"a skipped reconciliation adds n",
			func(m *metrics.Metrics) { m.ReconcileSkipped("page", 3) },
			"retryaudit_reconcile_skipped_total", map[string]string{"reason": "page"}, 3},
		{"a batch observes its size by kind",
			func(m *metrics.Metrics) { m.Batched("claim", 8) },
			"retryaudit_batch_size", map[string]string{"kind": "claim"}, 1},
		{"a shed request counts by kind",
			func(m *metrics.Metrics) { m.Shed("outcome") },
			"retryaudit_shed_total", map[string]string{"kind": "outcome"}, 1},
		{"a statement observes its round trip by op",
			func(m *metrics.Metrics) { m.Ran("begin", time.Now()) },
			"retryaudit_db_statement_duration_seconds", map[string]string{"op": "begin"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New()
			tt.record(m)
			if got := value(sample(t, m, tt.family, tt.labels)); got != tt.want {
				t.Errorf("%s%v = %v, want %v", tt.family, tt.labels, got, tt.want)
			}
		})
	}
}

// TestNilRecordsNothing: tests and commands leave the metrics out, and the
// recorders are called unconditionally.
func TestNilRecordsNothing(t *testing.T) {
	var m *metrics.Metrics
	m.Batched("claim", 1)
	m.Ran("begin", time.Now())
	m.Shed("claim")
	m.Claimed("claimed", "first_delivery", "")
	m.Reported("succeeded", true)
	m.Ingested("trigger_error")
	m.Delivered("sent")
	m.LookedUp("found", time.Millisecond)
	m.ReconcileSkipped("page", 1)
}

func TestNewRegistersTheRuntime(t *testing.T) {
	m := metrics.New()
	for _, name := range []string{"go_goroutines", "retryaudit_n8n_api_lookup_duration_seconds"} {
		found := false
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			found = found || f.GetName() == name
		}
		if !found {
			t.Errorf("%s is not registered", name)
		}
	}
}
