package handlers_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// from sends a request as if from addr, through the trusted proxy
// (127.0.0.1) that the test server is configured with.
func (s *server) from(t *testing.T, addr, auth, method, path string, body any) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(bodyString(t, body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", addr)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func bodyString(t *testing.T, body any) string {
	if body == nil {
		return ""
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestWrongTokensAreThrottled: past 20 wrong tokens in a minute from one
// address, on /v1 or the hooks' endpoint, the address is answered 429 with
// Retry-After until the minute ends, its right token too; other addresses
// are not affected; a token of the service's on the wrong route is no
// guess; and the log has a few lines per address, not one per guess.
func TestWrongTokensAreThrottled(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC))
		logs := &syncBuffer{}
		s := newServer(t, dialect, withHookToken, func(c *handlers.Config, _ *store.Options) {
			c.Now = clock.Now
			c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			c.UI.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		})
		const attacker, person = "203.0.113.7", "198.51.100.20"
		claim := claimBody("shop", "guess-1", "1")
		good := "Bearer " + testToken

		for i := range 20 {
			path := "/v1/events"
			if i%2 == 1 {
				path = "/v1/n8n/executions"
			}
			method := map[string]string{"/v1/events": "GET", "/v1/n8n/executions": "POST"}[path]
			if code, _ := s.from(t, attacker, "Bearer guess-"+string(rune('a'+i)), method, path, nil); code != http.StatusUnauthorized {
				t.Fatalf("wrong token %d: %d, want 401", i+1, code)
			}
		}
		code, h := s.from(t, attacker, "Bearer guess-21", "GET", "/v1/events", nil)
		if code != http.StatusTooManyRequests || h.Get("Retry-After") != "60" {
			t.Fatalf("the 21st wrong token: %d, Retry-After %q; want 429 and 60", code, h.Get("Retry-After"))
		}
		if code, _ := s.from(t, attacker, good, "POST", "/v1/claims", withWorkflow(claim)); code != http.StatusTooManyRequests {
			t.Errorf("the right token from the shut address: %d, want 429 (else a hit would show)", code)
		}
		if code, _ := s.from(t, attacker, "Bearer "+testHookToken, "POST", "/v1/n8n/executions", reports(hookEnd("1", "success"))); code != http.StatusTooManyRequests {
			t.Errorf("the hook token from the shut address: %d, want 429", code)
		}
		if code, _ := s.from(t, person, good, "POST", "/v1/claims", withWorkflow(claim)); code != http.StatusOK {
			t.Errorf("another address with the right token: %d, want 200", code)
		}
		for range 5 {
			// The service's own tokens on the wrong route are no guesses.
			s.from(t, person, "Bearer "+testHookToken, "GET", "/v1/events", nil)
			s.from(t, person, good, "POST", "/v1/n8n/executions", reports(hookEnd("2", "success")))
		}
		for range 16 {
			s.from(t, person, "Bearer nope", "GET", "/v1/events", nil)
		}
		if code, _ := s.from(t, person, good, "GET", "/v1/events", nil); code != http.StatusOK {
			t.Errorf("after 16 wrong tokens and 10 of the service's on the wrong routes: %d, want 200", code)
		}

		clock.Advance(59 * time.Second)
		if code, h := s.from(t, attacker, good, "GET", "/v1/events", nil); code != http.StatusTooManyRequests || h.Get("Retry-After") != "1" {
			t.Errorf("a second before the window ends: %d, Retry-After %q", code, h.Get("Retry-After"))
		}
		for range 500 {
			s.from(t, attacker, "Bearer guess-again", "GET", "/v1/events", nil)
		}
		clock.Advance(time.Second)
		if code, _ := s.from(t, attacker, good, "GET", "/v1/events", nil); code != http.StatusOK {
			t.Errorf("when the window ended, the right token: %d, want 200", code)
		}

		lines := strings.Count(logs.String(), "addr="+attacker)
		t.Logf("%d log lines name the address after 521 wrong or refused requests", lines)
		if lines > 3 || lines == 0 {
			t.Errorf("%d log lines name the address after 521 wrong or refused requests, want 1 to 3:\n%s", lines, logs)
		}
		if n := strings.Count(logs.String(), "status=401") + strings.Count(logs.String(), "status=429"); n != 10 {
			// The ten service tokens on the wrong route keep their lines.
			t.Errorf("%d request lines for refused tokens, want 10 (the service's own tokens on the wrong route)", n)
		}
		if strings.Contains(logs.String(), "guess-") {
			t.Error("a wrong token reached the log")
		}
	})
}

// TestGuessingRate measures how fast one address can try tokens: before,
// every wrong token was answered 401 as fast as the service answers (the
// issue measured 3,274 a second); now 20 a minute, then 429.
func TestGuessingRate(t *testing.T) {
	s := newServer(t, "sqlite", withHookToken)
	var tried, refused, after atomic.Int64
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				path, method := "/v1/events", "GET"
				if (w+i)%2 == 1 {
					path, method = "/v1/n8n/executions", "POST"
				}
				req, _ := http.NewRequest(method, s.URL+path, nil)
				req.Header.Set("Authorization", "Bearer guess-"+time.Now().String())
				resp, err := s.client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusUnauthorized:
					if refused.Load() > 0 {
						after.Add(1)
					}
					tried.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("in 2 s from one address: %d wrong tokens answered 401 (%d after the first 429, racing it), then %d answered 429 (%.0f/s)",
		tried.Load(), after.Load(), refused.Load(), float64(refused.Load())/2)
	if tried.Load() > int64(handlers.DefaultGuessLimit.Wrong) {
		t.Errorf("%d wrong tokens were tried, want at most %d a minute", tried.Load(), handlers.DefaultGuessLimit.Wrong)
	}
	if refused.Load() == 0 {
		t.Error("nothing was answered 429")
	}
}
