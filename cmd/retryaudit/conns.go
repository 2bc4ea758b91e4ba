package main

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimits caps the connections a listener keeps: each costs a goroutine
// and its buffers (about 22 KB idle), and idle keep-alive connections cost
// that while doing nothing.
type connLimits struct {
	// Open caps the connections at once (RETRYAUDIT_MAX_CONNS). A new one
	// past it closes the oldest idle keep-alive connection, else the
	// oldest that has not sent a request yet, else itself: a request being
	// served is never cut off.
	Open int
	// Idle caps the idle keep-alive connections
	// (RETRYAUDIT_MAX_IDLE_CONNS): one going idle past it closes the
	// oldest idle one.
	Idle int
}

// connTracker enforces connLimits through http.Server.ConnState.
type connTracker struct {
	limits connLimits
	log    *slog.Logger
	mu     sync.Mutex
	conns  map[net.Conn]*connInfo
	idle   int
	full   bool // at a cap: logged when it starts and when it ends
	closed int  // connections closed for the caps since the last line
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

func newConnTracker(l connLimits, log *slog.Logger) *connTracker {
	return &connTracker{limits: l, log: log, conns: map[net.Conn]*connInfo{}}
}

// track is the server's ConnState hook.
func (t *connTracker) track(c net.Conn, state http.ConnState) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	info := t.conns[c]
	if info != nil && info.state == http.StateIdle {
		t.idle--
	}
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(t.conns, c)
		t.note()
		return
	case http.StateNew:
		info = &connInfo{}
		t.conns[c] = info
	}
	if info == nil {
		return // a state after the connection was closed and forgotten
	}
	info.state, info.since = state, now
	switch state {
	case http.StateIdle:
		t.idle++
		if t.idle > t.limits.Idle {
			t.closeOldest(http.StateIdle, c)
		}
	case http.StateNew:
		if len(t.conns) > t.limits.Open && !t.closeOldest(http.StateIdle, c) && !t.closeOldest(http.StateNew, c) {
			delete(t.conns, c)
			c.Close()
			t.closed++
		}
	}
	t.note()
}

// closeOldest closes the connection in state that has been in it longest,
// other than except; it reports whether there was one. The connection is
// forgotten at once: its StateClosed comes later.
func (t *connTracker) closeOldest(state http.ConnState, except net.Conn) bool {
	var oldest net.Conn
	var at time.Time
	for c, info := range t.conns {
		if c != except && info.state == state && (oldest == nil || info.since.Before(at)) {
			oldest, at = c, info.since
		}
	}
	if oldest == nil {
		return false
	}
	if state == http.StateIdle {
		t.idle--
	}
	delete(t.conns, oldest)
	oldest.Close()
	t.closed++
	return true
}

// note logs when the caps start closing connections and when they stop:
// one line each way, however many are closed between.
func (t *connTracker) note() {
	full := t.closed > 0 && (len(t.conns) >= t.limits.Open || t.idle >= t.limits.Idle)
	switch {
	case full && !t.full:
		t.log.Warn("connections at their cap: closing the oldest idle ones to make room",
			"open", len(t.conns), "idle", t.idle, "max_open", t.limits.Open, "max_idle", t.limits.Idle)
		t.full, t.closed = true, 0
	case !full && t.full && len(t.conns) < t.limits.Open*9/10 && t.idle < t.limits.Idle*9/10:
		t.log.Info("connections under their cap again", "closed_meanwhile", t.closed, "open", len(t.conns))
		t.full, t.closed = false, 0
	}
}

// counts returns the connections open and idle.
func (t *connTracker) counts() (open, idle int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns), t.idle
}
