package handlers_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// scrape reads one sample of /metrics (0 when absent).
func (s *server) scrape(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := s.client.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMetrics(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)
		claimed := `retryaudit_claims_total{class="",decision="claimed",delivery="first_delivery"}`
		redelivered := `retryaudit_claims_total{class="n8n_double_start",decision="in_progress",delivery="redelivery"}`
		if v := s.scrape(t, claimed); v != 0 {
			t.Fatalf("%s = %v before any claim", claimed, v)
		}
		s.claim(t, claimBody("shop", "m-1", "1"))
		s.claim(t, claimBody("shop", "m-2", "2"))
		s.claim(t, claimBody("shop", "m-1", "3"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "m-1", "outcome": "unknown", "execution_id": "1"})
		s.call(t, "POST", "/v1/n8n/errors", `{"trigger":{"mode":"trigger","error":{}},"workflow":{"id":"w"}}`)
		s.store.RefreshGauges(context.Background())
		want := map[string]float64{
			claimed:     2,
			redelivered: 1,
			`retryaudit_outcomes_total{changed="true",outcome="unknown"}`: 1,
			`retryaudit_errors_ingested_total{kind="trigger_error"}`:      1,
			`retryaudit_review_queue_size`:                                1,
			`retryaudit_outbox_depth`:                                     2,
			`retryaudit_database_up`:                                      1,
			`retryaudit_http_request_duration_seconds_count{method="POST",route="/v1/claims",status="200"}`: 3,
		}
		for sample, v := range want {
			if got := s.scrape(t, sample); got != v {
				t.Errorf("%s = %v, want %v", sample, got, v)
			}
		}
		if age := s.scrape(t, "retryaudit_outbox_oldest_age_seconds"); age < 0 {
			t.Errorf("outbox age %v", age)
		}
		resp, _ := http.Get(s.URL + "/metrics")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/metrics answers %d", resp.StatusCode)
		}
		resp.Body.Close()
	})
}

// TestMetricsScrapesDoNotCount: /metrics needs no token, so scrapes must not
// reach the database: the gauges come from the background refresh.
func TestMetricsScrapesDoNotCount(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, func(_ *handlers.Config, o *store.Options) { o.GaugeInterval = time.Hour })
		before := s.scrape(t, "retryaudit_gauge_refreshes_total")
		if before < 1 {
			t.Fatalf("no refresh at start: %v", before)
		}
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() { defer wg.Done(); s.scrape(t, "retryaudit_review_queue_size") }()
		}
		wg.Wait()
		if after := s.scrape(t, "retryaudit_gauge_refreshes_total"); after != before {
			t.Errorf("50 scrapes read the database %v times", after-before)
		}
		s.claim(t, claimBody("shop", "g-1", "1"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "g-1", "outcome": "unknown", "execution_id": "1"})
		if v := s.scrape(t, "retryaudit_review_queue_size"); v != 0 {
			t.Errorf("the gauge moved without a refresh: %v", v)
		}
		s.store.RefreshGauges(context.Background())
		if v := s.scrape(t, "retryaudit_review_queue_size"); v != 1 {
			t.Errorf("after a refresh the review queue is %v, want 1", v)
		}
	})
}
