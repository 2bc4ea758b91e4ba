package store_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// tally counts the answers of a race: decisions, and errors by code.
type tally struct {
	mu      sync.Mutex
	answers map[string]int
	winners map[string]map[string]bool // key → the executions told to act
	notes   []string
}

func newTally() *tally {
	return &tally{answers: map[string]int{}, winners: map[string]map[string]bool{}}
}

func (t *tally) claim(key, exec string, res audit.ClaimResult, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		code := string(audit.ErrorCode(err))
		t.answers[code]++
		if len(t.notes) < 5 {
			t.notes = append(t.notes, err.Error())
		}
		return
	}
	t.answers[string(res.Decision)]++
	if res.Process {
		if t.winners[key] == nil {
			t.winners[key] = map[string]bool{}
		}
		t.winners[key][exec] = true
	}
}

func (t *tally) String() string {
	var parts []string
	for k, n := range t.answers {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// check holds a race to the bar: no answer says the database is
// unavailable, at most 1 % are busy, and one execution acted per key.
func (t *tally) check(tb testing.TB, total int) {
	tb.Helper()
	tb.Logf("answers: %s", t)
	if n := t.answers[string(audit.CodeUnavailable)]; n > 0 {
		tb.Errorf("%d of %d answers said the database is unavailable (it was up): %q", n, total, t.notes)
	}
	if n := t.answers[string(audit.CodeBusy)]; n*100 > total {
		tb.Errorf("%d of %d answers were busy, more than 1 %%: %q", n, total, t.notes)
	}
	for key, w := range t.winners {
		if len(w) != 1 {
			tb.Errorf("key %s: executions %v were told to act", key, w)
		}
	}
}

// apiContext is a request's context as the handlers give it: the API
// timeout's deadline (RETRYAUDIT_API_TIMEOUT, 15 s by default).
func apiContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 15*time.Second)
}

// race runs fn for every i in [0, n) on clients goroutines.
func race(n, clients int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// TestContentionIsNotAnOutage races 50 executions on 20 keys, every
// execution presenting every key (an execution claiming several items or
// events does that), on 64 clients: each key gets one winner, and the
// database, which is up, is never called unavailable.
func TestContentionIsNotAnOutage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := audittest.Open(t, dialect, store.Options{})
		const keys, execs = 20, 50
		tl := newTally()
		race(keys*execs, 64, func(i int) {
			key, exec := fmt.Sprintf("k%d", i%keys), fmt.Sprintf("%d", 1000+i/keys)
			ctx, cancel := apiContext()
			defer cancel()
			res, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: key,
				ExecutionID: exec, WorkflowID: "wf"})
			tl.claim(key, exec, res, err)
		})
		tl.check(t, keys*execs)
	})
}

// slowN8N is n8n's API answering every lookup after a delay: each
// execution is a webhook run, started when it was first asked about.
type slowN8N struct {
	delay time.Duration
	mu    sync.Mutex
	start map[string]time.Time
}

func (n *slowN8N) Execution(ctx context.Context, id string) (audit.N8NExecution, error) {
	select {
	case <-time.After(n.delay):
	case <-ctx.Done():
		return audit.N8NExecution{}, ctx.Err()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.start == nil {
		n.start = map[string]time.Time{}
	}
	if _, ok := n.start[id]; !ok {
		n.start[id] = time.Now().Add(-time.Second)
	}
	return audit.N8NExecution{ID: id, WorkflowID: "wf", Mode: "webhook", Status: "running", StartedAt: n.start[id]}, nil
}

// TestBurstsOfOneEventWithTheAPI sends bursts of simultaneous deliveries
// of one event (n8n starting several executions for one call, a sender
// retrying at once) with n8n's API configured and answering in 50 ms: every
// delivery is answered, one acts, none is shed.
func TestBurstsOfOneEventWithTheAPI(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		for _, burst := range []int{10, 50} {
			t.Run(fmt.Sprintf("bursts of %d", burst), func(t *testing.T) {
				s := audittest.Open(t, dialect, store.Options{Lookup: &slowN8N{delay: 50 * time.Millisecond}})
				tl := newTally()
				const rounds = 10
				for r := 0; r < rounds; r++ {
					key := fmt.Sprintf("e%d", r)
					race(burst, burst, func(i int) {
						exec := fmt.Sprintf("%d", 10000+r*1000+i)
						ctx, cancel := apiContext()
						defer cancel()
						res, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: key,
							ExecutionID: exec, WorkflowID: "wf"})
						tl.claim(key, exec, res, err)
					})
				}
				tl.check(t, rounds*burst)
			})
		}
	})
}

// TestTwoInstancesUnderContention runs two stores on one PostgreSQL
// database, as two instances of the service, with 50 executions racing on
// each of 20 keys through both.
func TestTwoInstancesUnderContention(t *testing.T) {
	url := audittest.URL(t, "postgres")
	a := audittest.OpenURL(t, store.Options{URL: url})
	b := audittest.OpenURL(t, store.Options{URL: url})
	const keys, execs = 20, 50
	tl := newTally()
	race(keys*execs*2, 64, func(i int) {
		s := a
		if i%2 == 1 {
			s = b
		}
		key, exec := fmt.Sprintf("k%d", (i/2)%keys), fmt.Sprintf("%d", 1000+i/2/keys)
		ctx, cancel := apiContext()
		defer cancel()
		res, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: key,
			ExecutionID: exec, WorkflowID: "wf"})
		tl.claim(key, exec, res, err)
	})
	tl.check(t, keys*execs*2)
}
