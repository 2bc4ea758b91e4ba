package notify

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// NotConfigured is the state text of alerts kept while no Slack is set up.
const NotConfigured = "not sent: Slack not configured"

// Worker drains the outbox. Several workers (in one process or in several
// instances on one database) never send a row twice: each leases its rows.
// A row is sent at least once; it is sent twice only if the process dies
// between Slack's answer and the row's update.
type Worker struct {
	Store    *audit.Store
	Notifier Notifier // nil when Slack is not configured
	Renderer *Renderer
	Log      *slog.Logger
	Owner    string // this worker, in leases

	Lease       time.Duration // how long a leased row is this worker's (default 2m)
	Poll        time.Duration // how often to look for due rows without a wake-up (default 2s)
	BaseBackoff time.Duration // the first retry's delay, doubled each time (default 2s)
	MaxBackoff  time.Duration // the cap of the delay (default 5m)
	GiveUpAfter time.Duration // a row still failing after this dead-letters (default 24h)
	MinInterval time.Duration // between two messages to one channel (default 1s)
	Now         func() time.Time

	mu       sync.Mutex
	lastSent map[string]time.Time
	logged   map[string]bool // dead-letter reasons already logged
}

func (w *Worker) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&w.Lease, 2*time.Minute)
	set(&w.Poll, 2*time.Second)
	set(&w.BaseBackoff, 2*time.Second)
	set(&w.MaxBackoff, 5*time.Minute)
	set(&w.GiveUpAfter, 24*time.Hour)
	set(&w.MinInterval, time.Second)
	if w.Now == nil {
		w.Now = time.Now
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	w.mu.Lock()
	if w.lastSent == nil {
		w.lastSent, w.logged = map[string]time.Time{}, map[string]bool{}
	}
	w.mu.Unlock()
}

// Run drains the outbox until ctx ends, right after every commit that wrote
// to it and at each poll. Rows left pending at shutdown stay in the table
// and go out after the next start.
func (w *Worker) Run(ctx context.Context) error {
	w.defaults()
	t := time.NewTicker(w.Poll)
	defer t.Stop()
	for {
		if _, err := w.Drain(ctx); err != nil && ctx.Err() == nil {
			w.Log.Warn("outbox: cannot read the outbox", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.Store.Wakeups():
		case <-t.C:
		}
	}
}

// Drain sends every row that is due now and returns how many attempts it
// made.
func (w *Worker) Drain(ctx context.Context) (int, error) {
	w.defaults()
	n := 0
	for ctx.Err() == nil {
		rows, err := w.Store.LeaseOutbox(ctx, w.Owner, w.Lease, 20)
		if err != nil || len(rows) == 0 {
			return n, err
		}
		for _, row := range rows {
			a := w.attempt(ctx, row)
			ok, err := w.Store.FinishOutbox(ctx, row.ID, w.Owner, a)
			if err != nil {
				return n, err
			}
			if !ok {
				w.Log.Warn("outbox: lease ran out before the row was finished", "row", row.ID)
			}
			n++
		}
	}
	return n, nil
}

// attempt sends one row and says how it ended.
func (w *Worker) attempt(ctx context.Context, row audit.OutboxRow) audit.Attempt {
	if w.Notifier == nil {
		return audit.Attempt{State: audit.OutboxUnconfigured, LastError: NotConfigured}
	}
	a, err := row.Alert()
	if err != nil {
		return w.dead(row, "the row's alert does not decode: "+err.Error())
	}
	msg, skip, err := w.message(ctx, row, a)
	switch {
	case err != nil:
		return w.failed(row, true, err)
	case skip != "":
		return audit.Attempt{State: audit.OutboxSkipped, LastError: skip}
	}
	if err := w.wait(ctx); err != nil {
		return w.failed(row, true, err)
	}
	posted, retry, err := w.Notifier.Notify(ctx, msg)
	w.sent()
	if err != nil {
		return w.failed(row, retry, err)
	}
	if row.Kind == audit.RowAlert && w.Notifier.Threads() {
		t := audit.Thread{Key: row.ThreadKey, Channel: posted.Channel, TS: posted.TS, RootRowID: row.ID}
		if err := w.Store.SaveThread(ctx, t); err != nil {
			w.Log.Warn("outbox: sent, but could not keep the thread", "row", row.ID, "err", err)
		}
	}
	return audit.Attempt{State: audit.OutboxSent, Channel: posted.Channel, TS: posted.TS}
}

// message builds what to send for a row: the first message of a thread, a
// reply in it, or the first message brought up to date. Without threads
// (a webhook, or a first message that never went out), a reply is sent as
// a message of its own, which names the event, and an update is skipped.
func (w *Worker) message(ctx context.Context, row audit.OutboxRow, a audit.Alert) (Message, string, error) {
	if row.Kind == audit.RowAlert {
		m, err := w.Renderer.render(a, asFirst)
		return m, "", err
	}
	thread, root, ok, err := w.Store.Thread(ctx, row.ThreadKey)
	if err != nil {
		return Message{}, "", err
	}
	threaded := ok && w.Notifier.Threads()
	if row.Kind == audit.RowRefresh {
		if !threaded {
			return Message{}, "no first message to update (webhook, or it was never sent)", nil
		}
		if later, err := w.Store.Superseded(ctx, row); err != nil || later {
			return Message{}, "a later update of the first message follows", err
		}
		current, err := w.Store.CurrentAlert(ctx, root)
		if err != nil {
			return Message{}, "", err
		}
		m, err := w.Renderer.render(current, asUpdate)
		m.Channel, m.UpdateTS = thread.Channel, thread.TS
		return m, "", err
	}
	if !threaded {
		m, err := w.Renderer.render(a, asFirst)
		return m, "", err
	}
	m, err := w.Renderer.render(a, asReply)
	m.Channel, m.ThreadTS = thread.Channel, thread.TS
	return m, "", err
}

// wait keeps at most one message per MinInterval going to the channel.
func (w *Worker) wait(ctx context.Context) error {
	w.mu.Lock()
	next := w.lastSent[w.Notifier.Name()].Add(w.MinInterval)
	w.mu.Unlock()
	d := next.Sub(time.Now())
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (w *Worker) sent() {
	w.mu.Lock()
	w.lastSent[w.Notifier.Name()] = time.Now()
	w.mu.Unlock()
}

// failed schedules the next attempt of a row, or dead-letters it.
func (w *Worker) failed(row audit.OutboxRow, retry bool, err error) audit.Attempt {
	now := w.Now()
	if !retry {
		return w.dead(row, err.Error())
	}
	if now.Sub(row.CreatedAt) > w.GiveUpAfter {
		return w.dead(row, fmt.Sprintf("gave up after %d attempts over %s: %v", row.Attempts, w.GiveUpAfter, err))
	}
	delay := RetryAfter(err)
	if delay <= 0 {
		delay = w.backoff(row.Attempts)
	}
	w.Log.Debug("outbox: will retry", "row", row.ID, "attempt", row.Attempts, "in", delay, "err", err)
	return audit.Attempt{State: audit.OutboxPending, RetryAt: now.Add(delay), LastError: err.Error()}
}

// backoff doubles from BaseBackoff per attempt up to MaxBackoff, with ±20%
// jitter so that rows failing together do not retry together.
func (w *Worker) backoff(attempts int) time.Duration {
	d := w.BaseBackoff
	for i := 1; i < attempts && d < w.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.MaxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// dead dead-letters a row, logging each reason once: a revoked token
// dead-letters every row for the same reason.
func (w *Worker) dead(row audit.OutboxRow, reason string) audit.Attempt {
	w.mu.Lock()
	first := !w.logged[reason]
	w.logged[reason] = true
	w.mu.Unlock()
	if first {
		w.Log.Error("outbox: a message cannot be delivered; it is kept as dead", "row", row.ID,
			"destination", w.Notifier.Name(), "reason", reason)
	}
	return audit.Attempt{State: audit.OutboxDead, LastError: reason}
}
