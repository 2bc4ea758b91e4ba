package n8n_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

// maxHostileHeap is the most heap the test process may reach against a
// hostile n8n: the answer caps (4 MiB a page, 256 KiB a lookup, 16 MiB
// of workflows) and what a pass keeps, with room for the garbage of the
// last answers. Before the caps, reconciliation and connect grew by
// hundreds of MiB within seconds.
const maxHostileHeap = 96 << 20

// TestAHostileN8NIsBounded runs reconciliation, lookups on the claim path
// and connect's planning against an n8n that answers with endless pages, a
// repeated or cycling cursor, 25 MiB bodies and slow drips, each for a
// while: every pass ends within its budget with n8n's failure, every
// claim is answered right, waits for n8n at most the client's timeout and
// mostly no longer than claims beside them with a healthy n8n, connect
// ends within its time, and the heap stays bounded.
// RETRYAUDIT_HOSTILE_N8N_FOR=5m runs each dialect that long, cycling the
// modes, and prints the peak.
func TestAHostileN8NIsBounded(t *testing.T) {
	each := 600 * time.Millisecond
	total := each * time.Duration(len(hostileModes))
	if v := os.Getenv("RETRYAUDIT_HOSTILE_N8N_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		total = d
	}
	audittest.Each(t, func(t *testing.T, dialect string) {
		h := newHostileN8N(t)
		var logs syncBuffer
		client := n8n.New(h.URL+"/api/v1", fakeKey, nil)
		client.Timeout = 500 * time.Millisecond
		client.Log = slog.New(slog.NewTextHandler(&logs, nil))
		s := audittest.Open(t, dialect, store.Options{Lookup: client})
		control := audittest.Open(t, dialect, store.Options{Lookup: n8n.New(newFakeN8N(t).url(), fakeKey, nil)})
		r := &n8n.Reconciler{Client: client, Store: s, Log: slog.New(slog.DiscardHandler), Grace: time.Minute,
			Lookback: time.Hour, Budget: time.Second}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		peak := sampleHeap(ctx)
		if err := r.Run(ctx); err != nil { // the first pass only notes where n8n stands
			t.Fatal(err)
		}

		var wg sync.WaitGroup
		var mu sync.Mutex
		var claims, controlClaims []time.Duration
		var failures []string
		failed := func(f string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if len(failures) < 20 {
				failures = append(failures, fmt.Sprintf(f, args...))
			}
		}
		start := time.Now()
		for i := 0; time.Since(start) < total; i++ {
			mode := hostileModes[i%len(hostileModes)]
			h.setMode(mode)
			until := time.Now().Add(min(each, total-time.Since(start)))
			wg.Add(3)
			go func() { // reconciliation, pass after pass
				defer wg.Done()
				for time.Now().Before(until) {
					began := time.Now()
					err := r.Run(ctx)
					if took := time.Since(began); took > r.Budget+time.Second {
						failed("%s: a pass took %s, its budget is %s", mode, took, r.Budget)
					}
					if !n8n.IsAPIFailure(err) {
						failed("%s: a pass ended with %v, want n8n's failure", mode, err)
					}
				}
			}()
			go func() { // claims, each looked up in n8n, beside claims looked up in a healthy one
				defer wg.Done()
				for j := 0; time.Now().Before(until); j++ {
					event := fmt.Sprintf("order-%d-%d", i, j)
					for _, c := range []struct {
						s    *store.Store
						took *[]time.Duration
					}{{s, &claims}, {control, &controlClaims}} {
						began := time.Now()
						first, err1 := c.s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: event + "-1",
							WorkflowID: "wf1"})
						again, err2 := c.s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: event + "-2",
							WorkflowID: "wf1"})
						mu.Lock()
						*c.took = append(*c.took, time.Since(began))
						mu.Unlock()
						if err1 != nil || err2 != nil || !first.Process || again.Process {
							failed("%s: claims of %s: %+v %v, then %+v %v", mode, event, first, err1, again, err2)
						}
					}
				}
			}()
			go func() { // connect's planning
				defer wg.Done()
				for time.Now().Before(until) {
					cctx, ccancel := context.WithTimeout(ctx, time.Second)
					began := time.Now()
					_, err := n8n.PlanWiring(cctx, n8n.NewAdmin(h.URL+"/api/v1", fakeKey),
						n8n.Wiring{ServiceURL: serviceURL, Token: token})
					ccancel()
					if took := time.Since(began); took > 2*time.Second || err == nil {
						failed("%s: connect planned in %s: %v", mode, took, err)
					}
				}
			}()
			wg.Wait()
		}
		cancel()
		for _, f := range failures {
			t.Error(f)
		}
		p := func(d []time.Duration, q float64) time.Duration {
			slices.Sort(d)
			return d[int(q*float64(len(d)-1))]
		}
		t.Logf("%s against a hostile n8n: peak heap %d MiB (the test process's peak RSS %s); %d claim pairs, "+
			"p50 %s, p95 %s, max %s; beside them, with a healthy n8n: p50 %s, p95 %s", total, peak()>>20, peakRSS(),
			len(claims), p(claims, 0.5), p(claims, 0.95), p(claims, 1), p(controlClaims, 0.5), p(controlClaims, 0.95))
		if got := peak(); got > maxHostileHeap {
			t.Errorf("the heap reached %d MiB, want under %d", got>>20, maxHostileHeap>>20)
		}
		// A claim waits for n8n at most the client's timeout: a drip holds
		// each lookup that long, so the pairs of that mode (one in seven)
		// take up to twice it. The claims of the other modes are as quick
		// as those beside a healthy n8n (on a busy machine all claims are
		// slow alike). A p95 of a dozen pairs was one drip pair away from
		// failing.
		if hostile, healthy := p(claims, 0.5), p(controlClaims, 0.5); hostile > 2*healthy+100*time.Millisecond {
			t.Errorf("claims waited for n8n: p50 %s, beside %s with a healthy n8n", hostile, healthy)
		}
		if most, bound := p(claims, 1), p(controlClaims, 1)+2*client.Timeout+time.Second; most > bound {
			t.Errorf("a claim pair took %s against a hostile n8n, over %s: a lookup waited past the client's %s",
				most, bound, client.Timeout)
		}
		if n := strings.Count(logs.String(), "level=WARN"); n < 1 || n > len(hostileModes) {
			t.Errorf("%d WARN lines, want one per change of n8n's state at most:\n%s", n, logs.String())
		}
	})
}

// sampleHeap watches the heap until ctx ends; the function returns its
// peak so far.
func sampleHeap(ctx context.Context) func() uint64 {
	var mu sync.Mutex
	var peak uint64
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			mu.Lock()
			peak = max(peak, m.HeapAlloc)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// peakRSS is the process's peak resident set (VmHWM), where Linux tells it.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
