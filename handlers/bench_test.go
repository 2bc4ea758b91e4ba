package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/handlers"
)

// BenchmarkClaimHTTP measures POST /v1/claims through the HTTP stack, from
// parallel clients: half the claims are first deliveries, half redeliveries.
func BenchmarkClaimHTTP(b *testing.B) {
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			store := audittest.Open(b, dialect, audit.Options{})
			h, err := handlers.New(handlers.Config{Store: store, Token: testToken, Links: audit.Links{BaseURL: "http://x"}})
			if err != nil {
				b.Fatal(err)
			}
			srv := newBenchServer(b, h)
			var n atomic.Int64
			b.SetParallelism(8) // 8 clients per CPU, as n8n's workers and senders would be
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				for pb.Next() {
					i := n.Add(1)
					body := fmt.Sprintf(`{"source":"bench","event_id":"e-%d","execution_id":"%d"}`, i/2, i)
					req, _ := http.NewRequest("POST", srv+"/v1/claims", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+testToken)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// BenchmarkClaimDuringFailedSignIns measures the claim's p95 latency idle,
// idle again (the noise floor: the same load a second time, on a database
// that grew), then while strangers try 100 wrong passwords per second, each
// from another address and for another name (so that no per-address or
// per-name limit stops them: the limit for everyone together and the
// bounded bcrypt pool do), and reports them and the ratios to idle.
func BenchmarkClaimDuringFailedSignIns(b *testing.B) {
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			store := audittest.Open(b, dialect, audit.Options{})
			hash, _ := bcrypt.GenerateFromPassword([]byte("a real password"), bcrypt.DefaultCost)
			h, err := handlers.New(handlers.Config{Store: store, Token: testToken, Links: audit.Links{BaseURL: "http://x"},
				UI: handlers.UIConfig{Users: map[string][]byte{"admin": hash},
					TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
			if err != nil {
				b.Fatal(err)
			}
			srv := newBenchServer(b, h)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			var seq atomic.Int64
			claims := func(n int) []time.Duration {
				var mu sync.Mutex
				var took []time.Duration
				var wg sync.WaitGroup
				per := (n + 3) / 4
				for range 4 { // four n8n workers
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							i := seq.Add(1)
							body := fmt.Sprintf(`{"source":"bench","event_id":"e-%d","execution_id":"%d"}`, i, i)
							req, _ := http.NewRequest("POST", srv+"/v1/claims", strings.NewReader(body))
							req.Header.Set("Authorization", "Bearer "+testToken)
							start := time.Now()
							resp, err := client.Do(req)
							if err != nil {
								b.Error(err)
								return
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							d := time.Since(start)
							if resp.StatusCode != http.StatusOK {
								b.Errorf("claim: %d", resp.StatusCode)
								return
							}
							mu.Lock()
							took = append(took, d)
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				return took
			}
			claims(50) // warm up: statements prepared, connections open
			b.ResetTimer()
			idle := p95(claims(b.N))
			again := p95(claims(b.N))

			stop := make(chan struct{})
			var attackers sync.WaitGroup
			var tries, refused atomic.Int64
			attackers.Add(1)
			go func() {
				defer attackers.Done()
				tick := time.NewTicker(10 * time.Millisecond) // 100 per second
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					attackers.Add(1)
					go func() {
						defer attackers.Done()
						req, _ := http.NewRequest("GET", srv+"/review", nil)
						req.SetBasicAuth(fmt.Sprintf("guess-%d", n), "wrong")
						req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255))
						resp, err := client.Do(req)
						if err != nil {
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						tries.Add(1)
						if resp.StatusCode != http.StatusUnauthorized {
							refused.Add(1)
						}
					}()
				}
			}()
			time.Sleep(200 * time.Millisecond) // let the attack reach its rate
			under := p95(claims(b.N))
			close(stop)
			attackers.Wait()
			b.StopTimer()
			ratio := float64(under) / float64(idle)
			b.ReportMetric(float64(idle.Microseconds())/1000, "idle-p95-ms")
			b.ReportMetric(float64(under.Microseconds())/1000, "attack-p95-ms")
			b.ReportMetric(ratio, "p95-ratio")
			b.ReportMetric(float64(again)/float64(idle), "idle-again-ratio")
			b.Logf("claim p95 idle %v, idle again %v (ratio %.2f), during %d failed sign-ins (%d answered busy or limited) %v: ratio %.2f",
				idle, again, float64(again)/float64(idle), tries.Load(), refused.Load(), under, ratio)
		})
	}
}

// p95 returns the 95th percentile of latencies.
func p95(took []time.Duration) time.Duration {
	if len(took) == 0 {
		return 0
	}
	slices.Sort(took)
	return took[(len(took)*95)/100]
}

// BenchmarkOverview renders /overview over RETRYAUDIT_BENCH_EVENTS seeded
// events (default 1,000,000: 1% of them processing, a tenth of those in
// review) and 14 days of rollups from 3 sources and 6 workflows, and reports
// the time per page.
func BenchmarkOverview(b *testing.B) {
	n := 1000000
	if v, err := strconv.Atoi(os.Getenv("RETRYAUDIT_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			store := audittest.Open(b, dialect, audit.Options{})
			seedOverview(b, store, dialect, n)
			cfg := handlers.Config{Store: store, Token: testToken, Links: audit.Links{BaseURL: "http://x"}}
			withUI(&cfg, nil)
			h, err := handlers.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			engine := h.Engine()
			render := func() {
				req := httptest.NewRequest("GET", "/overview", nil)
				req.SetBasicAuth("alice", alicePassword)
				rec := httptest.NewRecorder()
				engine.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "<svg") {
					b.Fatalf("GET /overview: %d", rec.Code)
				}
			}
			render() // signs in once: bcrypt is not the page's cost
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				render()
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/page")
		})
	}
}

func seedOverview(b *testing.B, store *audit.Store, dialect string, n int) {
	b.Helper()
	db := store.DB()
	events := `INSERT INTO webhook_events (source, event_id, status, review_reason, created_at, updated_at, last_seen_at)
		SELECT 'shop' || (i % 3), 'order-' || i, CASE WHEN i % 100 = 0 THEN 'processing' ELSE 'done' END,
		CASE WHEN i % 1000 = 0 THEN 'unknown' ELSE '' END, now(), now(), now() FROM generate_series(1, $1) AS i`
	rollups := `INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
		SELECT date_trunc('hour', now()) - h * interval '1 hour', 'shop' || s, 'wf' || w, m, sh, 1 + (h + w) % 7
		FROM generate_series(0, 14 * 24) AS h, generate_series(0, 2) AS s, generate_series(0, 5) AS w,
		unnest(ARRAY['delivery', 'first', 'stopped.sender_retry', 'stopped.n8n_double_start', 'retry', 'capture',
			'outcome.done', 'resolved']) AS m, generate_series(0, 3) AS sh`
	if dialect == "sqlite" {
		now := "strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')"
		events = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO webhook_events (source, event_id, status, review_reason, created_at, updated_at, last_seen_at)
			SELECT 'shop' || (i % 3), 'order-' || i, CASE WHEN i % 100 = 0 THEN 'processing' ELSE 'done' END,
			CASE WHEN i % 1000 = 0 THEN 'unknown' ELSE '' END, ` + now + `, ` + now + `, ` + now + ` FROM n`
		rollups = `WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < 336),
			s(i) AS (VALUES (0), (1), (2)), w(i) AS (VALUES (0), (1), (2), (3), (4), (5)),
			m(v) AS (VALUES ('delivery'), ('first'), ('stopped.sender_retry'), ('stopped.n8n_double_start'), ('retry'),
				('capture'), ('outcome.done'), ('resolved')), sh(i) AS (VALUES (0), (1), (2), (3))
			INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
			SELECT strftime('%Y-%m-%dT%H:00:00.000000Z', 'now', '-' || h.i || ' hours'), 'shop' || s.i, 'wf' || w.i, m.v,
			sh.i, 1 + (h.i + w.i) % 7 FROM h, s, w, m, sh`
	}
	for _, q := range []string{events, rollups} {
		args := []any{}
		if q == events {
			args = append(args, n)
		}
		if _, err := db.Exec(q, args...); err != nil {
			b.Fatalf("seed: %v", err)
		}
	}
	if err := store.CompactStats(context.Background()); err != nil {
		b.Fatalf("compact: %v", err)
	}
	if dialect == "postgres" {
		db.Exec(`ANALYZE`)
	}
}
