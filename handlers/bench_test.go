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
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// BenchmarkClaimHTTP measures POST /v1/claims through the HTTP stack, from
// parallel clients: half the claims are first deliveries, half redeliveries.
func BenchmarkClaimHTTP(b *testing.B) {
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			st := audittest.Open(b, dialect, store.Options{})
			h, err := handlers.New(handlers.Config{Store: st, Token: testToken, Links: audit.Links{BaseURL: "http://x"}})
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
					body := fmt.Sprintf(`{"source":"bench","event_id":"e-%d","execution_id":"%d","workflow_id":"wf1",`+
						`"run_stamp":"%d:1764925200123:b"}`, i/2, i, i)
					req, _ := http.NewRequest("POST", srv+"/v1/claims", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+testToken)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body) // read to the end: the connection is kept
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
			st := audittest.Open(b, dialect, store.Options{})
			hash, _ := bcrypt.GenerateFromPassword([]byte("a real password"), bcrypt.DefaultCost)
			h, err := handlers.New(handlers.Config{Store: st, Token: testToken, Links: audit.Links{BaseURL: "http://x"},
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
// events (default 1,000,000) and what a ledger of that size holds beside
// them (see seedOverview), and reports the time per page.
func BenchmarkOverview(b *testing.B) {
	n := 1000000
	if v, err := strconv.Atoi(os.Getenv("RETRYAUDIT_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for _, dialect := range audittest.Dialects {
		var st *store.Store // seeded once: the sub-benchmark runs more than once
		parent := b
		b.Run(dialect, func(b *testing.B) {
			if st == nil {
				st = audittest.Open(parent, dialect, store.Options{})
				start := time.Now()
				seedOverview(b, st, dialect, n)
				b.Logf("seeded %d events in %v", n, time.Since(start).Round(time.Second))
			}
			cfg := handlers.Config{Store: st, Token: testToken, Links: audit.Links{BaseURL: "http://x"}}
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
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// overviewSeed is what seedOverview writes, per dialect, side by side; $1
// (PostgreSQL) or ? (SQLite) is the number of events, n. Over the 14 days
// the page shows: n events, each with its execution (and one in seven with
// a second, a redelivery stopped), their links and 2.14 history lines on
// average (claim, outcome, redelivery); 0.1% of the events waiting for a
// person for an unknown outcome and 0.02% stale; 3 outbox rows per 100
// events (an alert, of the five kinds in turn, with a follow-up and a
// refresh; 95% sent, the rest waiting, dead or never sent) with payloads of
// an alert's size; a person's resolution for 0.5% of the events; and 14
// days of hourly counters from 3 sources and 6 workflows, folded into days
// as the service does.
var overviewSeed = map[string][]string{
	"postgres": {
		`INSERT INTO webhook_events (source, event_id, status, review_reason, holder_execution_id, deliveries,
			first_workflow_id, created_at, updated_at, last_seen_at, last_presented_at)
		SELECT 'shop' || (i % 3), 'order-' || i,
			CASE WHEN i % 1000 = 0 OR i % 5000 = 1 THEN 'processing' ELSE 'done' END,
			CASE WHEN i % 1000 = 0 THEN 'unknown' ELSE '' END, 'x' || i, 1 + (i % 7 = 0)::int, 'wf' || (i % 6),
			t, t, t, t
		FROM generate_series(1, $1::int) AS i, LATERAL (SELECT now() - i * interval '1.2 seconds' AS t) AS at`,
		`INSERT INTO executions (execution_id, workflow_id, workflow_name, mode, first_seen_at, last_seen_at)
		SELECT x, 'wf' || (i % 6), 'Workflow ' || (i % 6), 'webhook', t, t
		FROM generate_series(1, $1::int) AS i, LATERAL (SELECT now() - i * interval '1.2 seconds' AS t) AS at,
			LATERAL (SELECT 'x' || i AS x UNION ALL SELECT 'x' || i || '-2' WHERE i % 7 = 0) AS xs`,
		`INSERT INTO event_executions (source, event_id, execution_id, role, delivery, first_seen_at, acted,
			delivery_id, workflow_id, class)
		SELECT 'shop' || (i % 3), 'order-' || i, 'x' || i || suffix, 'claim', delivery, now() - i * interval '1.2 seconds',
			suffix = '', 'req-' || i || suffix, 'wf' || (i % 6), class
		FROM generate_series(1, $1::int) AS i, LATERAL (SELECT '' AS suffix, 'first_delivery' AS delivery, '' AS class
			UNION ALL SELECT '-2', 'redelivery', 'sender_retry' WHERE i % 7 = 0) AS d`,
		`INSERT INTO event_history (source, event_id, at, kind, execution_id, workflow_id, workflow_name, decision,
			delivery, status, message, class)
		SELECT 'shop' || (i % 3), 'order-' || i, least(now(), now() - i * interval '1.2 seconds' + k * interval '20 seconds'), kind,
			'x' || i, 'wf' || (i % 6), 'Workflow ' || (i % 6), decision, delivery, status, message, class
		FROM generate_series(1, $1::int) AS i, LATERAL (
			SELECT 0 AS k, 'claim' AS kind, 'claimed' AS decision, 'first_delivery' AS delivery, 'processing' AS status,
				'' AS message, '' AS class
			UNION ALL SELECT 1, 'outcome', CASE WHEN i % 1000 = 0 THEN 'unknown' ELSE 'done' END, '', 'done',
				'CRM order created', '' WHERE i % 5000 <> 1
			UNION ALL SELECT 2, 'claim', 'duplicate', 'redelivery', 'done', '', 'sender_retry' WHERE i % 7 = 0) AS h`,
		`INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, payload, state, attempts, sent_at)
		SELECT t, t, 'event:shop' || (e % 3) || '/order-' || e, role, 'shop' || (e % 3), 'order-' || e,
			'{"kind":"' || (ARRAY['execution_error', 'unknown_outcome', 'stale', 'fingerprint_mismatch',
				'unlinked_error'])[1 + j % 5] || '","source":"shop' || (e % 3) || '","event_id":"order-' || e ||
			'","status":"processing","deliveries":1,"workflow_id":"wf' || (e % 6) ||
			'","workflow_name":"Orders to CRM","node":"Create order","execution_id":"x' || e ||
			'","message":"' || repeat('CRM timed out after 30s; ', 12) || '","at":"2026-12-01T10:00:00Z"}',
			CASE WHEN j % 100 < 95 THEN 'sent' WHEN j % 100 < 97 THEN 'pending' WHEN j % 100 < 98 THEN 'dead'
				ELSE 'unconfigured' END, 1, t
		FROM generate_series(1, $1::int / 100) AS j, LATERAL (SELECT j * 100 AS e,
			now() - j * interval '120 seconds' AS t) AS at,
			LATERAL (VALUES ('alert'), ('followup'), ('refresh')) AS r(role)`,
		`UPDATE outbox SET alert_kind = CAST(payload AS json) ->> 'kind'`,
		`INSERT INTO resolution_times (resolved_at, source, seconds)
		SELECT now() - j * interval '240 seconds', 'shop' || (j % 3), 60 + (j * 7919) % 86400
		FROM generate_series(1, $1::int / 200) AS j`,
		`INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
		SELECT date_trunc('hour', now()) - h * interval '1 hour', 'shop' || s, 'wf' || w, m, sh, 1 + (h + w) % 7
		FROM generate_series(0, 14 * 24) AS h, generate_series(0, 2) AS s, generate_series(0, 5) AS w,
		unnest(ARRAY['delivery', 'first', 'stopped.sender_retry', 'stopped.n8n_double_start', 'retry', 'capture',
			'outcome.done', 'resolved']) AS m, generate_series(0, 3) AS sh`,
	},
	// SQLite: rows from a recursive CTE, times as the store writes them
	// (fixed width, UTC).
	"sqlite": {
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO webhook_events (source, event_id, status, review_reason, holder_execution_id, deliveries,
			first_workflow_id, created_at, updated_at, last_seen_at, last_presented_at)
		SELECT 'shop' || (i % 3), 'order-' || i,
			CASE WHEN i % 1000 = 0 OR i % 5000 = 1 THEN 'processing' ELSE 'done' END,
			CASE WHEN i % 1000 = 0 THEN 'unknown' ELSE '' END, 'x' || i, 1 + (i % 7 = 0), 'wf' || (i % 6),
			t, t, t, t FROM (SELECT i, ` + sqliteAgo("i * 1.2") + ` AS t FROM n)`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?),
			xs(i, x) AS (SELECT i, 'x' || i FROM n UNION ALL SELECT i, 'x' || i || '-2' FROM n WHERE i % 7 = 0)
		INSERT INTO executions (execution_id, workflow_id, workflow_name, mode, first_seen_at, last_seen_at)
		SELECT x, 'wf' || (i % 6), 'Workflow ' || (i % 6), 'webhook', ` + sqliteAgo("i * 1.2") + `,
			` + sqliteAgo("i * 1.2") + ` FROM xs`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?),
			d(i, suffix, delivery, class) AS (SELECT i, '', 'first_delivery', '' FROM n
				UNION ALL SELECT i, '-2', 'redelivery', 'sender_retry' FROM n WHERE i % 7 = 0)
		INSERT INTO event_executions (source, event_id, execution_id, role, delivery, first_seen_at, acted,
			delivery_id, workflow_id, class)
		SELECT 'shop' || (i % 3), 'order-' || i, 'x' || i || suffix, 'claim', delivery, ` + sqliteAgo("i * 1.2") + `,
			suffix = '', 'req-' || i || suffix, 'wf' || (i % 6), class FROM d`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?),
			h(i, k, kind, decision, delivery, status, message, class) AS (
				SELECT i, 0, 'claim', 'claimed', 'first_delivery', 'processing', '', '' FROM n
				UNION ALL SELECT i, 1, 'outcome', CASE WHEN i % 1000 = 0 THEN 'unknown' ELSE 'done' END, '', 'done',
					'CRM order created', '' FROM n WHERE i % 5000 <> 1
				UNION ALL SELECT i, 2, 'claim', 'duplicate', 'redelivery', 'done', '', 'sender_retry' FROM n WHERE i % 7 = 0)
		INSERT INTO event_history (source, event_id, at, kind, execution_id, workflow_id, workflow_name, decision,
			delivery, status, message, class)
		SELECT 'shop' || (i % 3), 'order-' || i, ` + sqliteAgo("max(i * 1.2 - k * 20, 0)") + `, kind, 'x' || i, 'wf' || (i % 6),
			'Workflow ' || (i % 6), decision, delivery, status, message, class FROM h ORDER BY i, k`,
		`WITH RECURSIVE n(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM n WHERE j < ? / 100),
			r(role) AS (VALUES ('alert'), ('followup'), ('refresh'))
		INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, payload, state, attempts, sent_at)
		SELECT t, t, 'event:shop' || (e % 3) || '/order-' || e, role, 'shop' || (e % 3), 'order-' || e,
			'{"kind":"' || CASE j % 5 WHEN 0 THEN 'execution_error' WHEN 1 THEN 'unknown_outcome' WHEN 2 THEN 'stale'
				WHEN 3 THEN 'fingerprint_mismatch' ELSE 'unlinked_error' END || '","source":"shop' || (e % 3) ||
			'","event_id":"order-' || e || '","status":"processing","deliveries":1,"workflow_id":"wf' || (e % 6) ||
			'","workflow_name":"Orders to CRM","node":"Create order","execution_id":"x' || e ||
			'","message":"' || replace(hex(zeroblob(12)), '00', 'CRM timed out after 30s; ') || '","at":"2026-12-01T10:00:00Z"}',
			CASE WHEN j % 100 < 95 THEN 'sent' WHEN j % 100 < 97 THEN 'pending' WHEN j % 100 < 98 THEN 'dead'
				ELSE 'unconfigured' END, 1, t
		FROM (SELECT j, j * 100 AS e, ` + sqliteAgo("j * 120") + ` AS t FROM n), r`,
		`UPDATE outbox SET alert_kind = json_extract(payload, '$.kind')`,
		`WITH RECURSIVE n(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM n WHERE j < ? / 200)
		INSERT INTO resolution_times (resolved_at, source, seconds)
		SELECT ` + sqliteAgo("j * 240") + `, 'shop' || (j % 3), 60 + (j * 7919) % 86400 FROM n`,
		`WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < 336),
			s(i) AS (VALUES (0), (1), (2)), w(i) AS (VALUES (0), (1), (2), (3), (4), (5)),
			m(v) AS (VALUES ('delivery'), ('first'), ('stopped.sender_retry'), ('stopped.n8n_double_start'), ('retry'),
				('capture'), ('outcome.done'), ('resolved')), sh(i) AS (VALUES (0), (1), (2), (3))
		INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
		SELECT strftime('%Y-%m-%dT%H:00:00.000000Z', 'now', '-' || h.i || ' hours'), 'shop' || s.i, 'wf' || w.i, m.v,
			sh.i, 1 + (h.i + w.i) % 7 FROM h, s, w, m, sh`,
	},
}

// sqliteAgo is the SQLite expression of now less seconds, as the store
// writes times.
func sqliteAgo(seconds string) string {
	return `strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', '-' || (` + seconds + `) || ' seconds')`
}

func seedOverview(b *testing.B, st *store.Store, dialect string, n int) {
	b.Helper()
	db := st.DB()
	for _, q := range overviewSeed[dialect] {
		var args []any
		if strings.Contains(q, "$1") || strings.Contains(q, "?") {
			args = append(args, n)
		}
		if _, err := db.Exec(q, args...); err != nil {
			b.Fatalf("seed: %v\n%s", err, q)
		}
	}
	if err := st.CompactStats(context.Background()); err != nil {
		b.Fatalf("compact: %v", err)
	}
	if dialect == "postgres" {
		db.Exec(`ANALYZE`)
	}
}
