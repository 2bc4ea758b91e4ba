package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// TestLockedRowStarvesNothing: a transaction from another connection (as
// n8n's Postgres node may run) holds one webhook_events row. The service
// runs with the production lock timeout, queue wait and pool. While n8n
// keeps redelivering that event, many claims of other keys arrive and are
// batched with its claims (set aside and tried again, batch after batch,
// for the queue wait). A claim that waited for the row would take the lock
// timeout at least, and the batch it shared with it; so every claim of
// another key must be answered 200, and every claim of the locked key 503
// with Retry-After, each in less than the lock timeout (the queue wait,
// 500 ms, is a quarter of it). (SQLite has no row locks: this is
// PostgreSQL's case.)
func TestLockedRowStarvesNothing(t *testing.T) {
	lockTimeout := store.DefaultLockTimeout
	s := newServer(t, "postgres", func(_ *handlers.Config, o *store.Options) {
		o.LockTimeout, o.Batching.Wait = lockTimeout, store.DefaultQueueWait
	})
	s.claim(t, claimBody("shop", "locked-1", "1"))

	other, err := sqlx.Open("postgres", s.store.Where())
	if err == nil {
		err = other.Ping()
	}
	if err != nil {
		// Where() hides the password; the test database has none.
		t.Fatalf("a second connection: %v", err)
	}
	defer other.Close()
	ctx := context.Background()
	lock, err := other.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.Exec(`SELECT 1 FROM webhook_events WHERE source = 'shop' AND event_id = 'locked-1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		code       int
		retryAfter string
		body       string
		took       time.Duration
	}
	post := func(body string) answer {
		req, _ := http.NewRequest("POST", s.URL+"/v1/claims", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		start := time.Now()
		resp, err := s.client.Do(req)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(raw), time.Since(start)}
	}

	// n8n redelivers the locked event all along.
	var mu sync.Mutex
	var locked, unrelated []answer
	stop := make(chan struct{})
	var redeliveries sync.WaitGroup
	var seq atomic.Int64
	for range 4 {
		redeliveries.Add(1)
		go func() {
			defer redeliveries.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a := post(fmt.Sprintf(`{"source":"shop","event_id":"locked-1","execution_id":"%d","workflow_id":"wf1"}`, 1000+seq.Add(1)))
				mu.Lock()
				locked = append(locked, a)
				mu.Unlock()
			}
		}()
	}
	var clients sync.WaitGroup
	for c := range 16 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := range 20 {
				a := post(fmt.Sprintf(`{"source":"shop","event_id":"free-%d-%d","execution_id":"%d","workflow_id":"wf1"}`, c, i, 100000+c*100+i))
				mu.Lock()
				unrelated = append(unrelated, a)
				mu.Unlock()
			}
		}()
	}
	clients.Wait()
	close(stop)
	redeliveries.Wait()

	// Everything above answered while the lock is still held.
	var took []time.Duration
	for i, a := range unrelated {
		if a.code != http.StatusOK {
			t.Errorf("unrelated claim %d: %d: %s", i, a.code, a.body)
		}
		took = append(took, a.took)
	}
	slices.Sort(took)
	worst := took[len(took)-1]
	t.Logf("%d unrelated claims beside %d claims of the locked key: p50 %s, p95 %s, max %s (%.2f of the lock timeout %s)",
		len(took), len(locked), took[len(took)/2], took[len(took)*95/100], worst, worst.Seconds()/lockTimeout.Seconds(), lockTimeout)
	if worst >= lockTimeout {
		t.Errorf("an unrelated claim took %s, at least the lock timeout (%s): it waited for the locked row", worst, lockTimeout)
	}
	if len(locked) < 4 {
		t.Fatalf("only %d claims of the locked key were answered", len(locked))
	}
	slices.SortFunc(locked, func(a, b answer) int { return int(a.took - b.took) })
	t.Logf("the locked key's claims: %s to %s", locked[0].took, locked[len(locked)-1].took)
	for i, a := range locked {
		if a.code != http.StatusServiceUnavailable || a.retryAfter == "" || !strings.Contains(a.body, "locked") {
			t.Errorf("claim %d of the locked key: %d, Retry-After %q: %s", i, a.code, a.retryAfter, a.body)
		}
		if a.took >= lockTimeout {
			t.Errorf("claim %d of the locked key was answered after %s, not before the lock timeout (%s)", i, a.took, lockTimeout)
		}
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if out := s.claim(t, map[string]any{"source": "shop", "event_id": "locked-1", "execution_id": "300"}); out["decision"] != "in_progress" {
		t.Errorf("after the lock: %v", out)
	}
}
