package store_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// dropProxy relays PostgreSQL's protocol and, when armed, loses the answer
// to the next COMMIT: it passes the COMMIT on, then cuts both connections
// before PostgreSQL's answer comes back (a proxy or a failover losing a
// reply). down refuses every new connection (the database unreachable).
type dropProxy struct {
	ln    net.Listener
	to    string
	armed atomic.Bool
	down  atomic.Bool // refuse new connections
	hole  atomic.Bool // accept new connections and never answer
	mu    sync.Mutex
	conns []net.Conn
}

func newDropProxy(t *testing.T, to string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, to: to}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			switch {
			case p.down.Load():
				c.Close()
				continue
			case p.hole.Load():
				p.mu.Lock()
				p.conns = append(p.conns, c)
				p.mu.Unlock()
				continue
			}
			go p.relay(c)
		}
	}()
	return p
}

func (p *dropProxy) relay(c net.Conn) {
	s, err := net.Dial("tcp", p.to)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	var dropping atomic.Bool // PostgreSQL's answers are no longer relayed
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && !dropping.Load() {
				if _, werr := c.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		c.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			lose := p.armed.Load() && bytes.Contains(chunk, []byte("COMMIT\x00")) && p.armed.CompareAndSwap(true, false)
			if lose {
				dropping.Store(true)
			}
			if _, werr := s.Write(chunk); werr != nil {
				break
			}
			if lose {
				time.Sleep(50 * time.Millisecond) // PostgreSQL commits; its answer is not relayed
				c.Close()
				s.Close()
				return
			}
		}
		if err != nil {
			break
		}
	}
	s.Close()
	c.Close()
}

// cut closes every relayed connection.
func (p *dropProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestLostCommit (issue 30, case 10): a commit whose answer is lost is
// answered as unknown — it may have been recorded — and the same claim
// sent again is answered as it was (the same execution, held), never as
// nothing recorded. While the database cannot be reached, a request that
// waited is told the database does not answer, not that it is busy.
func TestLostCommit(t *testing.T) {
	dsn := audittest.URL(t, "postgres")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newDropProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	s := audittest.OpenURL(t, store.Options{URL: u.String(), Batching: store.Batching{Wait: 5 * time.Millisecond}})
	t.Cleanup(p.cut) // before the store closes: its workers may wait in the hole
	ctx := context.Background()
	req := audit.ClaimRequest{Source: "shop", EventID: "lc1", ExecutionID: "80", WorkflowID: "wf", RunStamp: "80:1:a"}

	p.armed.Store(true)
	_, err = s.Claim(ctx, req)
	if audit.ErrorCode(err) != audit.CodeUnknown {
		t.Fatalf("the claim whose commit's answer was lost: %v, want unknown", err)
	}
	res, err := s.Claim(ctx, req)
	if err != nil || res.Decision != audit.DecisionHeld || !res.Process {
		t.Fatalf("the same claim again: %+v %v, want held (it was recorded)", res, err)
	}

	// A batch whose commit's answer is lost is not run again claim by
	// claim (each would find its own claim recorded and be told something
	// else): each claim of it is answered unknown, and held when sent again.
	var batch []audit.ClaimRequest
	for i := range 4 {
		id := fmt.Sprint(81 + i)
		batch = append(batch, audit.ClaimRequest{Source: "shop", EventID: "lb" + id, ExecutionID: id, WorkflowID: "wf",
			RunStamp: id + ":1:b"})
	}
	p.armed.Store(true)
	_, errs := s.ClaimTogether(ctx, batch)
	for i, req := range batch {
		if audit.ErrorCode(errs[i]) != audit.CodeUnknown {
			t.Errorf("claim %s of the batch whose commit's answer was lost: %v, want unknown", req.EventID, errs[i])
		}
		if res, err := s.Claim(ctx, req); err != nil || res.Decision != audit.DecisionHeld || !res.Process {
			t.Errorf("claim %s of the batch again: %+v %v, want held (it was recorded)", req.EventID, res, err)
		}
	}

	p.down.Store(true)
	p.cut()
	if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "lc2", ExecutionID: "90", WorkflowID: "wf"}); audit.ErrorCode(err) != audit.CodeUnavailable {
		t.Fatalf("a claim while connections are refused: %v, want unavailable", err)
	}
	// The database stops answering at all: the claims that wait for it
	// until their deadline are told it does not answer, not that it is
	// busy.
	p.down.Store(false)
	p.hole.Store(true)
	var codes []audit.Code
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "lc3", ExecutionID: fmt.Sprint(900 + i),
				WorkflowID: "wf"})
			mu.Lock()
			codes = append(codes, audit.ErrorCode(err))
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	for _, c := range codes {
		if c != audit.CodeUnavailable {
			t.Errorf("a claim while the database does not answer: %s, want unavailable (codes %v)", c, codes)
			break
		}
	}
}
