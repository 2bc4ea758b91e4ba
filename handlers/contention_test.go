package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// answers counts a race's answers over HTTP: decisions, and error codes.
type answers struct {
	mu      sync.Mutex
	n       map[string]int
	actors  map[string]map[string]bool // key → executions told to act
	samples []string
}

func (a *answers) add(key, exec string, code int, out map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n, a.actors = map[string]int{}, map[string]map[string]bool{}
	}
	if code != http.StatusOK {
		e, _ := out["error"].(map[string]any)
		a.n[fmt.Sprintf("%d %v", code, e["code"])]++
		if len(a.samples) < 3 {
			a.samples = append(a.samples, fmt.Sprint(e["message"]))
		}
		return
	}
	a.n[fmt.Sprint(out["decision"])]++
	if out["process"] == true {
		if a.actors[key] == nil {
			a.actors[key] = map[string]bool{}
		}
		a.actors[key][exec] = true
	}
}

// check holds the race to the bar: no 503 unavailable (the database is up),
// at most 1 % busy, one execution acting per key.
func (a *answers) check(t *testing.T, total int) {
	t.Helper()
	var parts []string
	for k, n := range a.n {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	t.Logf("%d answers: %s", total, strings.Join(parts, " "))
	if n := a.n["503 unavailable"]; n > 0 {
		t.Errorf("%d answers said the database is unavailable: %q", n, a.samples)
	}
	if n := a.n["503 busy"]; n*100 > total {
		t.Errorf("%d of %d answers were busy, more than 1 %%: %q", n, total, a.samples)
	}
	for key, execs := range a.actors {
		if len(execs) != 1 {
			t.Errorf("%s: %d executions were told to act", key, len(execs))
		}
	}
}

// raceHTTP sends n claims over clients connections at once.
func raceHTTP(s *server, t *testing.T, n, clients int, body func(i int) map[string]any, got *answers) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b := body(i)
				code, out := s.call(t, "POST", "/v1/claims", b)
				got.add(b["event_id"].(string), b["execution_id"].(string), code, out)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// TestContentionOverHTTP is the race, through the API: 50
// executions on 20 keys, every execution presenting every key, 64 clients.
// The database is up: nothing may be called an outage, and contention may
// cost at most 1 % of answers a busy.
func TestContentionOverHTTP(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, func(c *handlers.Config, _ *store.Options) { c.APITimeout = 15 * time.Second })
		const keys, execs = 20, 50
		var got answers
		raceHTTP(s, t, keys*execs, 64, func(i int) map[string]any {
			return claimBody("shop", fmt.Sprintf("k%d", i%keys), fmt.Sprint(1000+i/keys))
		}, &got)
		got.check(t, keys*execs)
	})
}

// slowAPI is n8n's API answering every lookup in 50 ms: every execution a
// webhook run.
type slowAPI struct{}

func (slowAPI) Execution(ctx context.Context, id string) (audit.N8NExecution, error) {
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return audit.N8NExecution{}, ctx.Err()
	}
	return audit.N8NExecution{ID: id, WorkflowID: "wf1", Mode: "webhook", Status: "running",
		StartedAt: time.Now().Add(-time.Second)}, nil
}

// TestBurstsOverHTTPWithTheAPI: ten bursts of 10 and of 50 simultaneous
// deliveries of one event, n8n's API configured and answering in 50 ms (a
// double start of n8n, a sender retrying at once): every delivery is
// answered, one acts per event, none is shed.
func TestBurstsOverHTTPWithTheAPI(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		for _, burst := range []int{10, 50} {
			t.Run(fmt.Sprintf("bursts of %d", burst), func(t *testing.T) {
				s := newServer(t, dialect, func(c *handlers.Config, o *store.Options) {
					c.APITimeout, o.Lookup = 15*time.Second, slowAPI{}
				})
				var got answers
				for r := range 10 {
					raceHTTP(s, t, burst, burst, func(i int) map[string]any {
						return claimBody("shop", fmt.Sprintf("burst-%d", r), fmt.Sprint(10000+r*1000+i))
					}, &got)
				}
				got.check(t, 10*burst)
			})
		}
	})
}
