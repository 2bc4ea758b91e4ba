package handlers

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// probeState is the row the write probe writes: the same one for every
// instance, so that probing adds no rows.
const probeState = "readiness.write_probe"

// probeTimeout bounds one probe: a write that takes longer counts as
// failing (a disk that hangs fails no write, it never finishes one).
const probeTimeout = 10 * time.Second

// dbHealth is what the handlers know of the database: whether its writes
// work, from the write probe, and whether requests found it unavailable.
// An outage is logged once when it starts and once when it ends, not per
// request or probe.
type dbHealth struct {
	mu sync.Mutex
	// writesFail holds the probe's last error; "" while writes work.
	writesFail string
	since      time.Time
	// unavailable is set by a request the database did not answer, and
	// cleared by the next probe that writes.
	unavailable bool
	failures    int // requests and probes that failed since the outage began
	probeNow    chan struct{}
}

// ProbeWrites writes a row every interval (Config.WriteProbe, default 5 s)
// until ctx ends, and at once when a request found the database failing:
// /readyz answers 503 while the writes fail and 200 again after one
// succeeds. Ping and a read succeed while a disk refuses every write
// (SQLite's disk I/O error, a full disk, a read-only remount), so only a
// write tells.
func (h *Handler) ProbeWrites(ctx context.Context) {
	t := time.NewTicker(cmp.Or(h.cfg.WriteProbe, 5*time.Second))
	defer t.Stop()
	for {
		h.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.health.probeNow:
		}
	}
}

func (h *Handler) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := h.store.SetState(pctx, probeState, h.cfg.Now().UTC().Format(time.RFC3339))
	if ctx.Err() != nil {
		return // stopping: a cancelled write says nothing of the database
	}
	hl := &h.health
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if err == nil {
		if hl.writesFail != "" || hl.unavailable {
			h.log.Info("database: writes succeed again; /readyz answers 200", "down_for",
				h.cfg.Now().Sub(hl.since).Round(time.Second), "failures", hl.failures)
		}
		hl.writesFail, hl.unavailable, hl.failures = "", false, 0
		return
	}
	hl.failures++
	if hl.writesFail == "" {
		if !hl.unavailable {
			hl.since = h.cfg.Now()
		}
		h.log.Warn("database: a write failed; /readyz answers 503 until one succeeds (logged again when it does)",
			"err", err)
	}
	hl.writesFail = audit.Truncate(err.Error(), 200)
}

// dbFailed notes a request the database did not answer (or failed with
// an internal error): the first of an outage is logged, and the probe runs
// at once to learn whether writes fail. It reports whether to log the
// request's error in full (the first of an outage).
func (h *Handler) dbFailed(err error) bool {
	hl := &h.health
	hl.mu.Lock()
	first := !hl.unavailable && hl.writesFail == ""
	if first {
		hl.since = h.cfg.Now()
	}
	hl.unavailable = true
	hl.failures++
	hl.mu.Unlock()
	select {
	case hl.probeNow <- struct{}{}:
	default:
	}
	return first
}

// writesFailing returns the probe's last error while writes fail.
func (h *Handler) writesFailing() string {
	h.health.mu.Lock()
	defer h.health.mu.Unlock()
	return h.health.writesFail
}
