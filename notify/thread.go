package notify

import (
	"context"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
)

// Thread is a Slack thread: the channel and ts of its first message, which
// replies name as their thread_ts and updates as the message to edit, and
// the outbox row that posted it.
type Thread struct {
	Key       string // the outbox rows' thread key
	Channel   string
	TS        string
	RootRowID int64
}

// ThreadStore is what Slack threads need from storage: the root of a
// thread, where its first message went. The root is saved with the state of
// the row that posted it, in one transaction (audit.Attempt.Root), so that
// a message sent is never recorded without the thread it opened.
type ThreadStore interface {
	Root(ctx context.Context, key string) (audit.ThreadRoot, audit.Alert, bool, error)
}

var _ ThreadStore = (*store.Store)(nil)

// root is what the store keeps of a thread.
func (t Thread) root() *audit.ThreadRoot {
	return &audit.ThreadRoot{Key: t.Key, Destination: t.Channel, MessageID: t.TS, RowID: t.RootRowID}
}

// findThread returns the Slack thread of a thread key and the alert its
// first message told; ok is false when no first message went out in a
// thread.
func findThread(ctx context.Context, s ThreadStore, key string) (Thread, audit.Alert, bool, error) {
	r, a, ok, err := s.Root(ctx, key)
	if err != nil || !ok {
		return Thread{}, a, false, err
	}
	return Thread{Key: r.Key, Channel: r.Destination, TS: r.MessageID, RootRowID: r.RowID}, a, true, nil
}

// opened returns the thread a sent message opens, or nil: only a message
// planned as a thread's first, posted where messages have threads.
func (w *Worker) opened(row audit.OutboxRow, p plan, posted Posted) *audit.ThreadRoot {
	if !p.opens || !w.Notifier.Threads() || posted.TS == "" {
		return nil
	}
	return Thread{Key: row.ThreadKey, Channel: posted.Channel, TS: posted.TS, RootRowID: row.ID}.root()
}
