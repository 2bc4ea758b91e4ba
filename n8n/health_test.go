package n8n_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/n8n"
)

// syncBuffer is a log both the test and the client's goroutines write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestN8NDownIsLoggedOnceAndBackOnce: while n8n's API is down, lookups and
// reconciliation passes log one WARN line between them; when it answers
// again, one INFO line. The service's own job loop logs nothing of it.
func TestN8NDownIsLoggedOnceAndBackOnce(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		e := newReconcileEnv(t, dialect)
		var logs syncBuffer
		e.fake.setDown(true)
		e.r.Client.Log = slog.New(slog.NewTextHandler(&logs, nil))
		ctx := context.Background()
		e.pass(t) // the first pass reads nothing from n8n
		for range 4 {
			e.clock.Advance(time.Minute)
			if err := e.r.Run(ctx); !n8n.IsAPIFailure(err) {
				t.Fatalf("a pass while n8n is down: %v, want n8n's failure", err)
			}
			if _, err := e.r.Client.Execution(ctx, "4711"); !n8n.IsAPIFailure(err) {
				t.Fatalf("a lookup while n8n is down: %v", err)
			}
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "n8n's API unreachable") {
			t.Fatalf("%d WARN lines while n8n was down, want one:\n%s", n, logs.String())
		}
		e.fake.setDown(false)
		for range 3 {
			e.clock.Advance(time.Minute)
			e.pass(t)
		}
		if n := strings.Count(logs.String(), "level=INFO"); n != 1 || !strings.Contains(logs.String(), `msg="n8n's API answers again"`) {
			t.Errorf("%d INFO lines once n8n answered again, want one:\n%s", n, logs.String())
		}
		if n := strings.Count(logs.String(), "\n"); n != 2 {
			t.Errorf("%d lines in all, want 2:\n%s", n, logs.String())
		}
	})
}

// TestASlowN8NHoldsOneClaimIn5s: once a lookup has timed out, lookups fail
// at once but for one every 5 s, so claims do not each wait for n8n.
func TestASlowN8NHoldsOneClaimIn5s(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	client := n8n.New(slow.URL+"/api/v1", fakeKey, nil)
	client.Timeout = 200 * time.Millisecond
	ctx := context.Background()
	var waited []time.Duration
	for i := range 20 {
		start := time.Now()
		if _, err := client.Execution(ctx, "x"+string(rune('a'+i))); err == nil || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("lookup %d: %v", i, err)
		}
		waited = append(waited, time.Since(start))
	}
	held := 0
	for _, w := range waited {
		if w >= 150*time.Millisecond {
			held++
		}
	}
	if held > 2 { // the first, and the probe right after it
		t.Errorf("%d of 20 lookups waited for a slow n8n, want at most 2: %v", held, waited)
	}
}
