package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/handlers"
)

// TestLockedRowStarvesNothing: a transaction from another connection (as
// n8n's Postgres node may run) holds one webhook_events row. Claims of that
// key answer 503 with Retry-After after the lock timeout, while the lock is
// still held; claims of every other key, many more than the pool has
// connections, are answered as usual meanwhile.
func TestLockedRowStarvesNothing(t *testing.T) {
	s := newServer(t, "postgres", func(_ *handlers.Config, o *audit.Options) {
		o.MaxConns, o.LockTimeout = 4, 300*time.Millisecond
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

	var wg sync.WaitGroup
	lockedCodes := make([]int, 8)
	lockedMsgs := make([]string, 8)
	retryAfter := make([]string, 8)
	for i := range lockedCodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", s.URL+"/v1/claims",
				strings.NewReader(fmt.Sprintf(`{"source":"shop","event_id":"locked-1","execution_id":"%d"}`, 100+i)))
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := s.client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			lockedCodes[i], lockedMsgs[i], retryAfter[i] = resp.StatusCode, string(body), resp.Header.Get("Retry-After")
		}()
	}
	unrelated := make([]int, 40)
	for i := range unrelated {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := s.call(t, "POST", "/v1/claims", claimBody("shop", fmt.Sprintf("free-%d", i), fmt.Sprint(200+i)))
			unrelated[i] = code
		}()
	}
	wg.Wait()
	// Everything above answered while the lock is still held.
	for i, code := range lockedCodes {
		if code != http.StatusServiceUnavailable || retryAfter[i] == "" || !strings.Contains(lockedMsgs[i], "locked") {
			t.Errorf("claim of the locked key: %d, Retry-After %q: %s", code, retryAfter[i], lockedMsgs[i])
		}
	}
	for i, code := range unrelated {
		if code != http.StatusOK {
			t.Errorf("unrelated claim %d: %d", i, code)
		}
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if out := s.claim(t, map[string]any{"source": "shop", "event_id": "locked-1", "execution_id": "300"}); out["decision"] != "in_progress" {
		t.Errorf("after the lock: %v", out)
	}
}
