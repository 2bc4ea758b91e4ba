package handlers_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// idleUpload opens a connection that posts an error body declaring size
// bytes and then sends one byte a second, like the attack of issue 19. It
// returns the status the service answered (0 when the connection ended
// without one) on the channel once the service answers or stop closes.
func idleUpload(t *testing.T, s *server, size int, stop <-chan struct{}) <-chan int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/n8n/errors HTTP/1.1\r\nHost: retryaudit.test\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{", testToken, size)
	answered := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				conn.Close()
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	return answered
}

// TestIdleUploadsHoldNoBudget: eight connections declare 8 MiB bodies (the
// whole 64 MiB budget) and send a byte a second. They hold the bytes that
// arrived, not what they declared: twenty claims beside them are answered
// 200, and each idle upload is cut off with 408 after the grace.
func TestIdleUploadsHoldNoBudget(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect) // 8 MiB error bodies, a 64 MiB budget
		stop := make(chan struct{})
		var once sync.Once
		closeAll := func() { once.Do(func() { close(stop) }) }
		t.Cleanup(closeAll)
		var uploads []<-chan int
		for range 8 {
			uploads = append(uploads, idleUpload(t, s, 8<<20, stop))
		}
		// Let the server take the eight requests in: what they hold is
		// what the claims below meet.
		time.Sleep(300 * time.Millisecond)
		var wg sync.WaitGroup
		codes := make([]int, 20)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = s.call(t, "POST", "/v1/claims", claimBody("shop", fmt.Sprintf("beside-%d", i), fmt.Sprint(i)))
			}()
		}
		wg.Wait()
		for i, code := range codes {
			if code != http.StatusOK {
				t.Errorf("claim %d beside the idle uploads: %d", i, code)
			}
		}
		if t.Failed() {
			closeAll()
			return
		}
		for i, answered := range uploads {
			select {
			case code := <-answered:
				if code != http.StatusRequestTimeout {
					t.Errorf("idle upload %d: %d, want 408", i, code)
				}
			case <-time.After(audittest.Patience(t)):
				t.Errorf("idle upload %d was never cut off", i)
			}
		}
	})
}
