package handlers_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// syncBuffer is a log sink that tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFailedSignInsAreLimited: a few wrong passwords per address and per
// name, then 429 with Retry-After, logged once per window; a signed-in
// person is not affected.
func TestFailedSignInsAreLimited(t *testing.T) {
	clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	logs := &syncBuffer{}
	s := newServer(t, "sqlite", func(c *handlers.Config, o *store.Options) {
		withUI(c, o)
		c.Now = clock.Now
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.UI.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.UI.Limits.Everyone = handlers.Limit{Burst: 1000, PerSecond: 1} // apart: below
	})
	from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
	alice := "alice:" + alicePassword

	if resp, _ := s.pageWith(t, "GET", "/", alice, nil, from("198.51.100.1")); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice signs in: %d", resp.StatusCode)
	}
	t.Run("an address is limited after a few failures", func(t *testing.T) {
		for i := range 5 {
			if resp, _ := s.pageWith(t, "GET", "/", "mallory:guess"+strconv.Itoa(i), nil, from("203.0.113.7")); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i+1, resp.StatusCode)
			}
		}
		for range 20 {
			resp, _ := s.pageWith(t, "GET", "/", "mallory:again", nil, from("203.0.113.7"))
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("after 5 failures: %d", resp.StatusCode)
			}
			if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
				t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
		}
		if n := strings.Count(logs.String(), "failed sign-ins limited"); n != 1 {
			t.Errorf("logged %d times in one window, want once:\n%s", n, logs.String())
		}
		if resp, _ := s.pageWith(t, "GET", "/", alice, nil, from("198.51.100.1")); resp.StatusCode != http.StatusOK {
			t.Errorf("alice, signed in already, is refused: %d", resp.StatusCode)
		}
		clock.Advance(2 * time.Second)
		if resp, _ := s.pageWith(t, "GET", "/", "mallory:later", nil, from("203.0.113.7")); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("after the refill: %d", resp.StatusCode)
		}
	})
	t.Run("a name is limited whatever the address", func(t *testing.T) {
		for i := range 10 {
			addr := fmt.Sprintf("192.0.2.%d", i+1)
			if resp, _ := s.pageWith(t, "GET", "/", "bob:wrong", nil, from(addr)); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i+1, resp.StatusCode)
			}
		}
		resp, _ := s.pageWith(t, "GET", "/", "bob:bob's password", nil, from("192.0.2.200"))
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("bob after 10 failures from 10 addresses: %d", resp.StatusCode)
		}
	})
	t.Run("trusted hops in X-Forwarded-For are skipped", func(t *testing.T) {
		for range 5 {
			s.pageWith(t, "GET", "/", "carol:x", nil, from("203.0.113.50"))
		}
		resp, _ := s.pageWith(t, "GET", "/", "dave:x", nil, from("203.0.113.50, 127.0.0.1"))
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("the limited address behind a trusted hop: %d", resp.StatusCode)
		}
	})
}

// TestFailedSignInsOfEveryoneAreLimited: strangers spreading their tries
// over many addresses and names still meet the limit for everyone.
func TestFailedSignInsOfEveryoneAreLimited(t *testing.T) {
	clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	s := newServer(t, "sqlite", func(c *handlers.Config, o *store.Options) {
		withUI(c, o)
		c.Now = clock.Now
		c.UI.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	limited := 0
	for i := range 20 {
		resp, _ := s.pageWith(t, "GET", "/", fmt.Sprintf("guess-%d:x", i), nil,
			map[string]string{"X-Forwarded-For": fmt.Sprintf("10.0.0.%d", i+1)})
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if want := 20 - handlers.DefaultSignInLimits.Everyone.Burst; limited != want {
		t.Errorf("%d of 20 spread tries limited, want %d", limited, want)
	}
}

// TestPeopleSignInWhileStrangersFail replays the attack of issue 19: two
// addresses send wrong passwords as fast as they may while twelve people,
// one every 1.5 s, each from an address of their own, sign in with the
// right one. Every person gets in; the strangers keep meeting 429.
func TestPeopleSignInWhileStrangersFail(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
		s := newServer(t, dialect, func(c *handlers.Config, o *store.Options) {
			withUI(c, o)
			c.Now = clock.Now
			c.UI.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			for i := range 12 {
				hash, _ := bcrypt.GenerateFromPassword([]byte(fmt.Sprintf("password of %d", i)), bcrypt.MinCost)
				c.UI.Users[fmt.Sprintf("person-%d", i)] = hash
			}
		})
		from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
		in, strangers := 0, map[int]int{}
		const tick = 100 * time.Millisecond // each stranger tries 10 times a second
		for step := range 12 * 15 {
			for _, addr := range []string{"203.0.113.66", "203.0.113.77"} {
				resp, _ := s.pageWith(t, "GET", "/", fmt.Sprintf("admin:guess-%d", step), nil, from(addr))
				strangers[resp.StatusCode]++
			}
			if step%15 == 14 { // every 1.5 s, a person
				i := step / 15
				resp, _ := s.pageWith(t, "GET", "/", fmt.Sprintf("person-%d:password of %d", i, i), nil,
					from(fmt.Sprintf("198.51.100.%d", i+1)))
				if resp.StatusCode == http.StatusOK {
					in++
				} else {
					t.Errorf("person %d at %s: %d", i, clock.Now().Format(time.TimeOnly), resp.StatusCode)
				}
			}
			clock.Advance(tick)
		}
		if in != 12 {
			t.Errorf("%d of 12 people signed in during the attack", in)
		}
		// One mistake does not make a person a stranger.
		for _, try := range []struct {
			pass string
			want int
		}{{"typo", http.StatusUnauthorized}, {"password of 3", http.StatusOK}} {
			s.pageWith(t, "GET", "/", "admin:guess", nil, from("203.0.113.66"))
			if resp, _ := s.pageWith(t, "GET", "/", "person-3:"+try.pass, nil, from("198.51.100.200")); resp.StatusCode != try.want {
				t.Errorf("person 3 with %q during the attack: %d, want %d", try.pass, resp.StatusCode, try.want)
			}
			clock.Advance(time.Second)
		}
		// The strangers' passwords were checked no more often than their
		// address's limit allows: a burst of 5, then 1 a second, each.
		if n := strangers[http.StatusUnauthorized]; n > 2*(5+18+1) || strangers[http.StatusTooManyRequests] == 0 {
			t.Errorf("the strangers were answered %v", strangers)
		}
	})
}
