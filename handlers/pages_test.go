package handlers_test

import (
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

const (
	alicePassword = "correct horse battery staple"
	hostileID     = `<script>alert("x")</script>' "/%2F ü 🙂`
	hostileName   = `<img src=x onerror=alert(1)>`
)

func withUI(c *handlers.Config, _ *store.Options) {
	hash, _ := bcrypt.GenerateFromPassword([]byte(alicePassword), bcrypt.MinCost)
	bob, _ := bcrypt.GenerateFromPassword([]byte("bob's password"), bcrypt.MinCost)
	c.UI = handlers.UIConfig{Users: map[string][]byte{"alice": hash, "bob": bob}}
	c.Links.N8NEditorURL = "https://n8n.example"
	c.Links.CRM = map[string]string{"shop": "https://crm.example.com/o?id={event_id}"}
}

// page fetches a page as a user (name:password), without following redirects.
func (s *server) page(t *testing.T, method, path, user string, form url.Values) (*http.Response, string) {
	t.Helper()
	return s.pageWith(t, method, path, user, form, nil)
}

// pageWith is page with extra request headers (Origin, Sec-Fetch-Site).
func (s *server) pageWith(t *testing.T, method, path, user string, form url.Values, headers map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if name, pass, ok := strings.Cut(user, ":"); ok {
		req.SetBasicAuth(name, pass)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: s.client.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// seedHostile fills the store with what a hostile sender or n8n could send.
func seedHostile(t *testing.T, s *server) {
	t.Helper()
	body := claimBody("shop", hostileID, "666")
	body["workflow_name"] = hostileName
	body["node"] = `"><script>alert(2)</script>`
	s.claim(t, body)
	s.outcome(t, map[string]any{"source": "shop", "event_id": hostileID, "outcome": "unknown", "execution_id": "666",
		"reason": "<script>alert(3)</script>" + strings.Repeat("long message ", 400)})
	code, _ := s.call(t, "POST", "/v1/n8n/errors", `{"execution":{"id":"666","mode":"webhook",
		"lastNodeExecuted":"<b>node</b>","error":{"message":"<script>alert(4)</script>","description":"`+
		strings.Repeat("x", 5000)+`"}},"workflow":{"id":"wf<1>","name":"`+strings.ReplaceAll(hostileName, `"`, `\"`)+`"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("seed error: %d", code)
	}
	code, _ = s.call(t, "POST", "/v1/n8n/errors", `{"trigger":{"mode":"trigger","error":{"node":{"name":"<i>trig</i>"}}},
		"workflow":{"id":"w2","name":"x"},"message":"<script>alert(5)</script>"}`)
	if code != http.StatusAccepted {
		t.Fatalf("seed trigger error: %d", code)
	}
}

func TestPagesEscape(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		seedHostile(t, s)
		alice := "alice:" + alicePassword
		_, list := s.page(t, "GET", "/", alice, nil)
		link := regexp.MustCompile(`href="(/events/shop/[^"]+)"`).FindStringSubmatch(list)
		if link == nil {
			t.Fatalf("the list links to no event:\n%s", list)
		}
		eventPath := html.UnescapeString(link[1])
		for _, path := range []string{"/", "/?status=processing&prefix=%3Cscript", eventPath, "/review",
			"/executions/666", "/errors", "/errors/1", "/errors/2", "/errors?kind=trigger_error"} {
			t.Run(path, func(t *testing.T) {
				resp, body := s.page(t, "GET", path, alice, nil)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d:\n%s", resp.StatusCode, body)
				}
				for _, raw := range []string{"<script>", "<img src=x", "<b>node", "<i>trig"} {
					if strings.Contains(body, raw) {
						t.Errorf("the page holds %q unescaped", raw)
					}
				}
				if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") ||
					!strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
					t.Errorf("Content-Security-Policy = %q", csp)
				}
				if resp.Header.Get("X-Frame-Options") != "DENY" {
					t.Error("no X-Frame-Options: DENY")
				}
			})
		}
		_, page := s.page(t, "GET", eventPath, alice, nil)
		if !strings.Contains(page, html.EscapeString(hostileID)) && !strings.Contains(page, "&lt;script&gt;alert(&#34;x&#34;)") {
			t.Errorf("the event page does not show the id, escaped:\n%s", page)
		}
		if strings.Count(page, "long message") > 60 {
			t.Error("a long message is shown whole")
		}
	})
}

func TestPagesSignIn(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		for _, tc := range []struct{ name, user string }{
			{"no credentials", ""},
			{"a wrong password", "alice:nope"},
			{"an unknown user", "mallory:" + alicePassword},
			{"the API token as a password", "alice:" + testToken},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, _ := s.page(t, "GET", "/", tc.user, nil)
				if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
					t.Errorf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
				}
			})
		}
		t.Run("page credentials do not open the API", func(t *testing.T) {
			req, _ := http.NewRequest("GET", s.URL+"/v1/events", nil)
			req.SetBasicAuth("alice", alicePassword)
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
		t.Run("the API token does not open the pages", func(t *testing.T) {
			req, _ := http.NewRequest("GET", s.URL+"/review", nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	})
}

func TestPagesTrustHeader(t *testing.T) {
	s := newServer(t, "sqlite", func(c *handlers.Config, o *store.Options) {
		withUI(c, o)
		c.UI.TrustHeader = "X-Forwarded-User"
		c.UI.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	req, _ := http.NewRequest("GET", s.URL+"/", nil)
	req.Header.Set("X-Forwarded-User", "carol@example.com")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "carol@example.com") {
		t.Errorf("with the header from the proxy: %d", resp.StatusCode)
	}
	if resp, _ := s.page(t, "GET", "/", "alice:"+alicePassword, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("Basic sign-in while trusting a header: %d", resp.StatusCode)
	}
	t.Run("the header from any other peer signs nobody in", func(t *testing.T) {
		h, err := handlers.New(handlers.Config{Store: s.store, Token: testToken, UI: handlers.UIConfig{
			TrustHeader: "X-Forwarded-User", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", "/review", nil)
		req.RemoteAddr = "203.0.113.9:51000"
		req.Header.Set("X-Forwarded-User", "carol@example.com")
		rec := httptest.NewRecorder()
		h.Engine().ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "carol@example.com") {
			t.Errorf("status %d from 203.0.113.9", rec.Code)
		}
	})
}

func TestResolutionForm(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		alice := "alice:" + alicePassword
		s.claim(t, claimBody("shop", "order/1042", "1"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "order/1042", "outcome": "unknown", "execution_id": "1"})
		path := "/events/shop/order%2F1042"
		status := func() string {
			_, ev := s.call(t, "GET", "/v1/events/shop/order%2F1042", nil)
			return ev["status"].(string)
		}
		cross := map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
		refused := []struct {
			name    string
			user    string
			form    url.Values
			headers map[string]string
			code    int
		}{
			{"from another site", alice, url.Values{"to": {"done"}, "note": {"found it"}}, cross, 403},
			{"from another origin (no Sec-Fetch-Site)", alice, url.Values{"to": {"done"}, "note": {"x"}},
				map[string]string{"Origin": "https://evil.example"}, 403},
			{"from a sibling subdomain", alice, url.Values{"to": {"done"}, "note": {"x"}},
				map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
			{"without credentials", "", url.Values{"to": {"done"}, "note": {"x"}}, nil, 401},
			{"without a note", alice, url.Values{"to": {"done"}, "note": {"  "}}, nil, 422},
			{"with a decision that is none", alice, url.Values{"to": {"maybe"}, "note": {"x"}}, nil, 422},
		}
		for _, tc := range refused {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := s.pageWith(t, "POST", path, tc.user, tc.form, tc.headers)
				if resp.StatusCode != tc.code {
					t.Errorf("status %d, want %d:\n%s", resp.StatusCode, tc.code, body)
				}
				if st := status(); st != "processing" {
					t.Fatalf("the refused form changed the entry to %s", st)
				}
			})
		}

		t.Run("two people at once: one wins, the other is told who", func(t *testing.T) {
			var wg sync.WaitGroup
			codes := make([]int, 2)
			bodies := make([]string, 2)
			for i, to := range []string{"done", "failed"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, body := s.pageWith(t, "POST", path, alice,
						url.Values{"to": {to}, "note": {"checked the CRM at 03:12"}, "holder": {"1"}},
						map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": s.URL})
					codes[i], bodies[i] = resp.StatusCode, body
				}()
			}
			wg.Wait()
			wins, losses := 0, 0
			for i := range codes {
				switch codes[i] {
				case http.StatusSeeOther:
					wins++
				case http.StatusConflict:
					losses++
					if !strings.Contains(bodies[i], "resolved by alice") {
						t.Errorf("the loser is not told who resolved it:\n%s", bodies[i])
					}
				}
			}
			if wins != 1 || losses != 1 {
				t.Fatalf("codes %v", codes)
			}
			_, ev := s.call(t, "GET", "/v1/events/shop/order%2F1042", nil)
			history := ev["history"].([]any)
			last := history[0].(map[string]any) // newest first
			if last["kind"] != "resolution" || last["actor"] != "alice" || last["message"] != "checked the CRM at 03:12" {
				t.Errorf("the history ends with %v", last)
			}
		})
	})
}

func TestListCountsAreCachedBriefly(t *testing.T) {
	clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	s := newServer(t, "sqlite", func(c *handlers.Config, o *store.Options) {
		withUI(c, o)
		c.Now = clock.Now
	})
	alice := "alice:" + alicePassword
	total := func() string {
		_, page := s.page(t, "GET", "/", alice, nil)
		m := regexp.MustCompile(`all <strong>(\d+)</strong>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no total on the page:\n%s", page)
		}
		return m[1]
	}
	s.claim(t, claimBody("shop", "c-1", "1"))
	if got := total(); got != "1" {
		t.Fatalf("total %s, want 1", got)
	}
	s.claim(t, claimBody("shop", "c-2", "2"))
	if got := total(); got != "1" {
		t.Errorf("total %s within the cache's 10s, want the cached 1", got)
	}
	clock.Advance(11 * time.Second)
	if got := total(); got != "2" {
		t.Errorf("total %s after 11s, want 2", got)
	}
}

// csrfOf checks that the page has a resolution form and returns its csrf
// field's value. Forms carry no token any more (checkCSRF checks the
// request's origin), so the value is empty and posting it changes nothing.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	if !strings.Contains(page, `<form class="resolve"`) {
		t.Fatal("the page has no resolution form")
	}
	return ""
}
