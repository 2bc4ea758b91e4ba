package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"
)

// benchOverload measures the claim capacity at 32 clients, then offers twice
// that for d, open loop, and says whether every answer was 200 or a 503 with
// Retry-After within a second.
func benchOverload(ctx context.Context, o options, d time.Duration) error {
	for _, dialect := range o.dialects {
		env := map[string]string{}
		if dialect == "postgres" {
			db, err := createDatabase(ctx)
			if err != nil {
				return err
			}
			defer db.drop()
			env["RETRYAUDIT_DATABASE_URL"] = db.url()
		}
		svc, err := startService(ctx, o.bin, env)
		if err != nil {
			return err
		}
		w := &workload{run: fmt.Sprintf("o%d", time.Now().UnixNano())}
		capacity := closedLoop(ctx, svc, 32, o.duration, w.request("claim")).rate()
		m := openLoop(ctx, svc, 2*capacity, d, 8192, w.request("claim"))
		_, peak := svc.rss()
		served503, slowServed := svc.shedTimes()
		svc.stop()
		ok := m.byStatus[http.StatusOK]
		shed := m.byStatus[http.StatusServiceUnavailable]
		bad := m.n - ok - shed
		verdict := "PASS"
		if bad > 0 || m.transportErrs > 0 || m.no503RetryAfter > 0 || m.slowest503 > time.Second {
			verdict = "FAIL"
		}
		fmt.Printf("%s: the service's own clock: %.0f answered 503, %.0f of them after more than 1 s\n",
			dialect, served503, slowServed)
		fmt.Printf("%s: capacity %.0f claims/s at 32 clients; offered %.0f/s for %s: %d answered 200 (%.0f/s), %d shed 503 "+
			"(slowest %s, %d without Retry-After), %d other; p50 %s p99 %s max %s; peak RSS %.0f MB; %s\n",
			dialect, capacity, 2*capacity, d, ok, float64(ok)/m.elapsed.Seconds(), shed, ms(m.slowest503),
			m.no503RetryAfter, bad+m.transportErrs, ms(m.pct(0.5)), ms(m.pct(0.99)), ms(m.pct(1)), peak, verdict)
		if m.byStatus[-1] > 0 {
			fmt.Fprintf(os.Stderr, "note: the generator held back %d calls (8192 in flight)\n", m.byStatus[-1])
		}
	}
	return nil
}
