package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
)

// NotConfigured is the state text of alerts kept while no Slack is set up.
const NotConfigured = "not sent: Slack not configured"

// Worker drains the outbox. Several workers, in one process or in several
// instances on one database, never send a row twice: a worker leases one
// row right before it sends it, renews the lease while the send runs, and
// records how the attempt ended only while it still holds the lease. An
// attempt whose answer never came (a timeout, a reset connection, a worker
// that died mid-send) leaves the row marked maybe-sent, and the next attempt
// looks for the message in the channel's history before posting again.
type Worker struct {
	Store    *store.Store
	Notifier Notifier // nil when Slack is not configured
	Renderer *Renderer
	Log      *slog.Logger
	Owner    string // this worker, in leases

	// Lease is how long a leased row is this worker's (default 1m); it is
	// renewed every third of it while the attempt runs, so a send as slow
	// as the client's timeout allows never loses it.
	Lease time.Duration
	// AttemptTimeout bounds one attempt: waiting for the channel, looking in
	// its history and sending (default 2m).
	AttemptTimeout time.Duration
	// StopGrace is how long the attempt in flight may go on after the stop
	// (default 20s): it finishes and is recorded rather than cut off and
	// sent again after the restart.
	StopGrace   time.Duration
	Poll        time.Duration // how often to look for due rows without a wake-up (default 2s)
	BaseBackoff time.Duration // the first retry's delay, doubled each time (default 2s)
	MaxBackoff  time.Duration // the cap of the delay (default 5m)
	GiveUpAfter time.Duration // a row still failing after this dead-letters (default 24h)
	MinInterval time.Duration // between two messages to one channel, from every instance (default 1s)
	Now         func() time.Time
	// Logged remembers the dead-letter reasons and warnings logged already.
	// Give every worker of an instance the same one, so that each is
	// logged once per instance; nil, the worker keeps its own.
	Logged *Once

	mu     sync.Mutex
	origin string // this database's mark in message metadata
}

// Once remembers keys seen, for the workers of one instance: a warning that
// every row would repeat is logged once.
type Once struct {
	mu      sync.Mutex
	seen    map[string]bool
	outages map[string]*outageState // see Down and Up
}

// First reports whether key is seen for the first time.
func (o *Once) First(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	first := !o.seen[key]
	o.seen[key] = true
	return first
}

func (w *Worker) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&w.Lease, time.Minute)
	set(&w.AttemptTimeout, 2*time.Minute)
	set(&w.StopGrace, 20*time.Second)
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
	if w.Logged == nil {
		w.Logged = &Once{}
	}
	w.mu.Unlock()
}

// Run queues again what a change of the Slack configuration makes sendable,
// then drains the outbox until ctx ends: right after every commit that
// wrote to it, and at each poll. At the stop, the row in flight is finished
// and recorded; rows never attempted stay pending for the next start.
func (w *Worker) Run(ctx context.Context) error {
	w.defaults()
	if _, err := w.Resend(ctx); err != nil && ctx.Err() == nil {
		w.databaseFailed("check whether the Slack configuration changed", err)
	}
	t := time.NewTicker(w.Poll)
	defer t.Stop()
	for {
		switch _, err := w.Drain(ctx); {
		case err != nil && ctx.Err() == nil:
			w.databaseFailed("read the outbox", err)
		case err == nil:
			w.databaseAnswered()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.Store.Wakeups():
		case <-t.C:
		}
	}
}

// Resend records the fingerprint of the Slack configuration and, when it
// changed, queues again the alerts of the last 24 hours that were not sent
// for want of a working configuration. It returns how many it queued.
func (w *Worker) Resend(ctx context.Context) (int, error) {
	w.defaults()
	fp, err := ConfigFingerprint(ctx, w.Store, w.Notifier)
	if err != nil {
		return 0, err
	}
	n, err := w.Store.ResendAfterChange(ctx, fp)
	if n > 0 {
		w.Log.Info("outbox: the Slack configuration changed: alerts it could not send are queued again",
			"alerts", n, "since", audit.ResendWindow)
	}
	return n, err
}

// Drain sends every row that is due now, one lease at a time, and returns
// how many it attempted.
func (w *Worker) Drain(ctx context.Context) (int, error) {
	w.defaults()
	n := 0
	for ctx.Err() == nil {
		rows, err := w.Store.LeaseOutbox(ctx, w.Owner, w.Lease, 1)
		if err != nil || len(rows) == 0 {
			return n, err
		}
		released, err := w.process(ctx, rows[0])
		if err != nil {
			return n, err
		}
		if !released {
			n++
		}
	}
	return n, nil
}

// process attempts one leased row and records how it ended. The attempt
// runs on a context the stop does not cancel (for StopGrace at most): a
// message that went out is recorded as sent, not posted again after the
// restart.
func (w *Worker) process(ctx context.Context, row audit.OutboxRow) (bool, error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.AttemptTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		select {
		case <-actx.Done():
		case <-time.After(w.StopGrace):
			cancel()
		}
	})()
	stopRenewing := w.keepLease(row.ID, cancel)
	out := w.attempt(ctx, actx, row)
	stopRenewing()
	return out.release, w.record(ctx, row, out)
}

// keepLease renews the lease of a row every third of the lease until the
// returned function is called. When the lease is lost (or cannot be renewed
// before it runs out), it calls lost: the send stops rather than race the
// worker that takes the row over.
func (w *Worker) keepLease(id int64, lost context.CancelFunc) func() {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := w.Lease / 3
		t := time.NewTicker(every)
		defer t.Stop()
		held := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(ctx, every)
			ok, err := w.Store.RenewOutbox(rctx, id, w.Owner, w.Lease)
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case err == nil && ok:
				held = time.Now()
			case err == nil:
				w.Log.Warn("outbox: another worker took the row over; stopping this attempt", "row", id)
				lost()
				return
			case time.Since(held) > w.Lease-every:
				w.Log.Warn("outbox: cannot renew the lease before it runs out; stopping this attempt", "row", id, "err", err)
				lost()
				return
			}
		}
	}()
	return func() { stop(); <-done }
}

// finishTimeout bounds recording an attempt, retries included.
const finishTimeout = 15 * time.Second

// record writes how an attempt ended, retrying through a database blip: a
// message sent and not recorded would be looked for (and, without the
// history scope, posted again) after the lease ran out.
func (w *Worker) record(ctx context.Context, row audit.OutboxRow, out result) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		var ok bool
		var err error
		if out.release {
			ok, err = w.Store.ReleaseOutbox(fctx, row.ID, w.Owner, out.due)
		} else {
			ok, err = w.Store.FinishOutbox(fctx, row.ID, w.Owner, out.attempt)
		}
		switch {
		case err == nil && !ok:
			w.Log.Warn("outbox: the lease ran out before the row was finished", "row", row.ID)
			return nil
		case err == nil:
			return nil
		}
		select {
		case <-fctx.Done():
			// The database is down: the row is looked for in the channel
			// before it is posted again (with the history scope).
			w.Log.Warn("outbox: cannot record how an attempt ended; the row is taken over when its lease ends",
				"row", row.ID, "state", out.attempt.State, "err", err)
			w.databaseFailed("record an attempt", err)
			return err
		case <-time.After(delay):
			delay *= 2
		}
	}
}

// once reports whether key is seen for the first time by this instance's
// workers, so that a warning that every row would repeat is logged once.
func (w *Worker) once(key string) bool {
	w.mu.Lock()
	logged := w.Logged
	w.mu.Unlock()
	return logged.First(key)
}
