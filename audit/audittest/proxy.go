package audittest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy puts a TCP proxy in front of the PostgreSQL server that dbURL names
// and returns the URL through it, and cut, which closes the proxy and every
// connection through it: the database becomes unreachable, as in an outage.
func Proxy(t testing.TB, dbURL string) (string, func()) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	var once sync.Once
	cut := func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		})
	}
	t.Cleanup(cut)
	u.Host = ln.Addr().String()
	return u.String(), cut
}
