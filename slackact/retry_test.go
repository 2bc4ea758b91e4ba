package slackact_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/retries"
	"github.com/retryaudit/retryaudit/slackact"
)

// fakeN8N says every execution failed, and retries each as a new one
// that succeeds.
type fakeN8N struct {
	mu      sync.Mutex
	retried []string
}

func (f *fakeN8N) ExecutionNow(ctx context.Context, id string) (audit.N8NExecution, error) {
	return audit.N8NExecution{ID: id, WorkflowID: "wf1", Status: "error"}, nil
}

func (f *fakeN8N) Retry(ctx context.Context, id string) (audit.N8NExecution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retried = append(f.retried, id)
	return audit.N8NExecution{ID: id + "-retry", WorkflowID: "wf1", Status: "success", RetryOf: id}, nil
}

func (f *fakeN8N) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.retried)
}

func TestRetryInN8NFromSlack(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect)
		n := &fakeN8N{}
		retrier := retries.New(retries.Config{Store: r.store, N8N: n})
		r.worker.Renderer.Actions.Retry = true
		r.handler.Actions = slackact.StoreActions{Store: r.store, RetryFunc: slackact.RetriesRetry(retrier)}

		r.unknown(t, "ord-9")
		first := r.slack.waitFor(t, "chat.postMessage", 1)[0]
		b := buttons(t, first.Blocks)
		if b[notify.ActionRetry] != "" {
			t.Fatal("a processing entry's alert offers Retry in n8n")
		}
		r.post(signed(form(payload(alice, notify.ActionFailed, b[notify.ActionFailed])), secret, time.Now()))
		r.drain(t)
		up := r.slack.waitFor(t, "chat.update", 1)
		b = buttons(t, up[len(up)-1].Blocks)
		if b[notify.ActionRetry] == "" || b[notify.ActionDone] != "" {
			t.Fatalf("a failed entry's alert offers %v, want Retry in n8n", b)
		}
		r.post(signed(form(payload(alice, notify.ActionRetry, b[notify.ActionRetry])), secret, time.Now()))
		eph := r.slack.waitFor(t, "chat.postEphemeral", 2)[1]
		if !strings.Contains(eph.Text, "Retried shop/ord-9 in n8n: execution 4711 → 4711-retry succeeded") || n.count() != 1 {
			t.Fatalf("the answer %q, %d retries sent", eph.Text, n.count())
		}
		ev := r.event(t, "ord-9")
		last := ev.History[len(ev.History)-1]
		if last.Actor != "alice" || last.Delivery != audit.ViaSlack {
			t.Fatalf("the retry's history line: %+v", last)
		}
		// The same button again: the entry moved on, nothing is sent.
		r.post(signed(form(payload(alice, notify.ActionRetry, b[notify.ActionRetry])), secret, time.Now()))
		eph = r.slack.waitFor(t, "chat.postEphemeral", 3)[2]
		if !strings.HasPrefix(eph.Text, "Nothing was changed") || n.count() != 1 {
			t.Fatalf("a stale Retry: %q, %d retries sent", eph.Text, n.count())
		}
	})
}
