package main

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// idleConn opens a connection to addr, makes one keep-alive request on it
// and leaves it open and idle; nil when the server closed it.
func idleConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: retryaudit\r\n\r\n"); err != nil {
		c.Close()
		return nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}

// lockedLog is a log the server's goroutines write while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIdleConnectionsAreCapped: one client opening thousands of keep-alive
// connections and leaving them idle holds at most the caps' worth of the
// server's goroutines and memory (before, every one was kept until its idle
// timeout, about 22 KB each), and a new client is still served.
func TestIdleConnectionsAreCapped(t *testing.T) {
	const conns = 3000
	limits := connLimits{Open: 256, Idle: 64}
	logs := &lockedLog{}
	tracker := newConnTracker(limits, slog.New(slog.NewTextHandler(logs, nil)))
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"ok"}`)
	}), tracker)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range conns {
		if c := idleConn(t, ln.Addr().String()); c != nil {
			held = append(held, c)
		}
	}
	time.Sleep(200 * time.Millisecond) // the closed ones' goroutines end
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)
	extra := runtime.NumGoroutine() - goroutines
	open, idle := tracker.counts()
	t.Logf("%d keep-alive connections opened and left idle: the server keeps %d (%d idle), with %d goroutines and %d KB more (caps: %d open, %d idle)",
		conns, open, idle, extra, grown>>10, limits.Open, limits.Idle)
	if extra > limits.Open+16 {
		t.Errorf("%d goroutines more after %d idle connections, want at most the cap of %d", extra, conns, limits.Open)
	}
	if max := int64(limits.Open) * 64 << 10; grown > max {
		t.Errorf("memory grew by %d KB, want under %d KB (64 KB per connection the cap lets stay)", grown>>10, max>>10)
	}
	if open, idle := tracker.counts(); open > limits.Open || idle > limits.Idle {
		t.Errorf("%d connections open and %d idle, over the caps %d and %d", open, idle, limits.Open, limits.Idle)
	}

	// Connections that send nothing: the open cap holds them too.
	for range 1000 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		held = append(held, c)
	}
	time.Sleep(200 * time.Millisecond)
	if open, _ := tracker.counts(); open > limits.Open {
		t.Errorf("%d connections open after 1000 silent ones, over the cap %d", open, limits.Open)
	}

	c := idleConn(t, ln.Addr().String())
	if c == nil {
		t.Fatal("a new client was not served after the flood")
	}
	c.Close()
	if !strings.Contains(logs.String(), "connections at their cap") || strings.Count(logs.String(), "at their cap") > 1 {
		t.Errorf("want one line saying the cap was reached:\n%s", logs)
	}
}
