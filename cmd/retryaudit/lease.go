package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/retryaudit/retryaudit/audit/store"
)

// leaseFor returns the lease a job run every interval is held with: short,
// so that when its holder dies another instance takes the job over within
// one interval (at most ttl after the last renewal, seen at the next try,
// ttl/3 later: 2/3 of the interval), and at most 30 s.
func leaseFor(interval time.Duration) (ttl, renew time.Duration) {
	ttl = min(max(interval/2, time.Second), 30*time.Second)
	return ttl, ttl / 3
}

// leased runs fn every interval on the one instance that holds the named
// lease. Every instance tries to take the lease every renew period; the
// holder renews it so, also while fn runs. An instance that takes the lease
// runs fn at once; one that loses it (it could not renew in time) cancels
// the fn that is running. At shutdown the holder waits for fn and releases
// the lease, so that another instance takes over at its next try.
func (j *jobs) leased(ctx context.Context, store *store.Store, log *slog.Logger, owner, name string,
	interval time.Duration, fn func(context.Context) error) {
	ttl, renew := leaseFor(interval)
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		l := &leaseLoop{store: store, log: log, owner: owner, name: name, ttl: ttl, interval: interval, fn: fn}
		l.loop(ctx, renew)
	}()
}

type leaseLoop struct {
	store         *store.Store
	log           *slog.Logger
	owner, name   string
	ttl, interval time.Duration
	fn            func(context.Context) error
	heldUntil     time.Time // by this process's clock; zero while not held
	holding       context.Context
	cancelHolding context.CancelFunc
	running       bool
	done          chan error
	next          time.Time
	failing       bool
}

func (l *leaseLoop) loop(ctx context.Context, renew time.Duration) {
	l.done = make(chan error, 1)
	t := time.NewTicker(renew)
	defer t.Stop()
	for {
		l.try(ctx)
		if !l.heldUntil.IsZero() && !l.running && !time.Now().Before(l.next) {
			l.running = true
			l.next = time.Now().Add(l.interval)
			go func(ctx context.Context) { l.done <- l.fn(ctx) }(l.holding)
		}
		select {
		case <-ctx.Done():
			l.shutdown()
			return
		case err := <-l.done:
			l.running = false
			l.report(ctx, err)
		case <-t.C:
		}
	}
}

// try takes or renews the lease. When the database does not answer, the
// lease is kept until it would have run out, then given up.
func (l *leaseLoop) try(ctx context.Context) {
	asked := time.Now()
	held, err := l.store.TakeLease(ctx, l.name, l.owner, l.ttl)
	switch {
	case err != nil && ctx.Err() == nil:
		if !l.heldUntil.IsZero() && time.Now().After(l.heldUntil) {
			l.log.Warn("job lease lost: its renewal failed", "job", l.name, "err", err)
			l.drop()
		}
	case err != nil:
	case held:
		if l.heldUntil.IsZero() {
			l.holding, l.cancelHolding = context.WithCancel(ctx)
			l.next = time.Time{} // run at once
			l.log.Info("job lease taken", "job", l.name, "owner", l.owner)
		}
		l.heldUntil = asked.Add(l.ttl)
	case !l.heldUntil.IsZero():
		l.log.Warn("job lease lost: another instance took it", "job", l.name)
		l.drop()
	}
}

// drop stops acting as the holder: a running fn is cancelled.
func (l *leaseLoop) drop() {
	l.heldUntil = time.Time{}
	l.cancelHolding()
}

func (l *leaseLoop) shutdown() {
	if l.running {
		<-l.done // fn's context is ctx's child: it is ending
	}
	if l.heldUntil.IsZero() {
		return
	}
	l.cancelHolding()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.store.ReleaseLease(ctx, l.name, l.owner); err != nil {
		l.log.Warn("job lease not released: another instance takes over when it runs out", "job", l.name,
			"lease", l.ttl, "err", err)
	}
}

// report logs a failing job when it starts failing and when it recovers,
// rather than at every run.
func (l *leaseLoop) report(ctx context.Context, err error) {
	switch {
	case err != nil && ctx.Err() == nil && l.holding.Err() == nil && !l.failing:
		l.log.Warn("background job failing", "job", l.name, "err", err)
		l.failing = true
	case err == nil && l.failing:
		l.log.Info("background job recovered", "job", l.name)
		l.failing = false
	}
}
