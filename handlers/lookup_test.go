package handlers_test

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/people"
)

// lookupServer is a server whose source shop has a CRM lookup against a
// fake CRM: ids starting with "found" are found as CRM-123, others not.
func lookupServer(t *testing.T, dialect string) *server {
	t.Helper()
	return lookupServerAt(t, dialect, time.Now)
}

// lookupServerAt is lookupServer with the handlers' clock now.
func lookupServerAt(t *testing.T, dialect string, now func() time.Time) *server {
	t.Helper()
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Query().Get("external_id"), "found") {
			w.Write([]byte(`{"orders":[{"number":"CRM-123"}]}`))
			return
		}
		w.Write([]byte(`{"orders":[]}`))
	}))
	t.Cleanup(crm.Close)
	cfg := handlers.Config{Token: testToken, MaxBody: 1 << 20, Metrics: metrics.New(), ServeMetrics: true, Now: now,
		Links: audit.Links{BaseURL: "http://retryaudit.test"}}
	withUI(&cfg, nil)
	cfg.Store = audittest.Open(t, dialect, store.Options{Metrics: cfg.Metrics})
	l, err := people.NewLookups(cfg.Store, cfg.Links, n8n.Redactor{}, cfg.Metrics, []people.LookupConfig{{Source: "shop",
		URL: crm.URL + "/orders?external_id={event_id}", Found: "orders.0", Ref: "orders.0.number"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lookups = l
	return startServer(t, cfg)
}

// aliceAuth is alice's sign-in to the pages, as an Authorization header.
var aliceAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+alicePassword))

var (
	versionRe = regexp.MustCompile(`name="version" value="(\d+)"`)
	sameSite  = map[string]string{"Sec-Fetch-Site": "same-origin"}
)

func TestLookupAPI(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := lookupServer(t, dialect)
		s.claim(t, claimBody("shop", "found/1", "1"))
		s.claim(t, claimBody("other", "x", "2"))
		_, before := s.call(t, "GET", "/v1/events/shop/found%2F1", nil)
		code, res := s.callAs(t, aliceAuth, "POST", "/v1/events/shop/found%2F1/lookup", map[string]any{})
		if code != 200 || res["result"] != "found" || res["crm_ref"] != "CRM-123" || res["via"] != "api" ||
			res["actor"] != "alice" ||
			res["crm_url"] != "https://crm.example.com/o?id=found%2F1" {
			t.Fatalf("%d %v", code, res)
		}
		if n := s.scrape(t, `retryaudit_crm_lookups_total{result="found",source="shop"}`); n != 1 {
			t.Errorf("retryaudit_crm_lookups_total{result=\"found\",source=\"shop\"} is %v, want 1", n)
		}
		_, after := s.call(t, "GET", "/v1/events/shop/found%2F1", nil)
		if after["version"] != before["version"] {
			t.Errorf("the lookup moved the version: %v → %v", before["version"], after["version"])
		}
		if h := after["history"].([]any)[0].(map[string]any); h["kind"] != "lookup" || h["decision"] != "found" ||
			h["actor"] != "alice" || h["crm_ref"] != "CRM-123" {
			t.Errorf("the history ends with %v", h)
		}
		for _, tc := range []struct {
			name, auth, path string
			body             any
			code             int
			field            string
		}{
			{"without a sign-in", "", "/v1/events/shop/found%2F1/lookup", map[string]any{}, 401, ""},
			{"with n8n's token: a lookup is a person's", "Bearer " + testToken, "/v1/events/shop/found%2F1/lookup",
				map[string]any{"actor": "alice"}, 401, ""},
			{"naming another person", aliceAuth, "/v1/events/shop/found%2F1/lookup", map[string]any{"actor": "bob"}, 422, "actor"},
			{"an unknown event", aliceAuth, "/v1/events/shop/nope/lookup", map[string]any{}, 404, ""},
			{"a source without a lookup", aliceAuth, "/v1/events/other/x/lookup", map[string]any{}, 422, "source"},
			{"no /lookup suffix", aliceAuth, "/v1/events/shop/found%2F1", map[string]any{}, 404, ""},
			{"an id ending in an escaped /lookup", aliceAuth, "/v1/events/shop/found%2Flookup", map[string]any{}, 404, ""},
			{"not JSON", aliceAuth, "/v1/events/shop/found%2F1/lookup", "actor=a", 400, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, out := s.callAs(t, tc.auth, "POST", tc.path, tc.body)
				if code != tc.code {
					t.Fatalf("status %d, want %d: %v", code, tc.code, out)
				}
				if tc.field != "" {
					fields, _ := out["error"].(map[string]any)["fields"].(map[string]any)
					if fields[tc.field] == nil {
						t.Errorf("the error does not name %s: %v", tc.field, out)
					}
				}
			})
		}
	})
}

func TestLookupPage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := lookupServer(t, dialect)
		alice := "alice:" + alicePassword
		s.claim(t, claimBody("shop", "found-1", "1"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "found-1", "outcome": "unknown", "execution_id": "1"})
		s.claim(t, claimBody("shop", "gone-1", "1")) // running: not in review yet
		s.claim(t, claimBody("shop", "found-2", "1"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "found-2", "outcome": "unknown", "execution_id": "1"})
		t.Run("the review queue and the event page offer the button", func(t *testing.T) {
			for _, path := range []string{"/review", "/events/shop/found-1"} {
				_, body := s.page(t, "GET", path, alice, nil)
				if !strings.Contains(body, `action="/events/shop/found-1/lookup"`) || !strings.Contains(body, "Look up in CRM") {
					t.Errorf("%s has no lookup button:\n%s", path, body)
				}
			}
		})
		t.Run("from the review queue, the answer is on the event's card", func(t *testing.T) {
			resp, _ := s.pageWith(t, "POST", "/events/shop/found-2/lookup", alice, url.Values{"back": {"review"}}, sameSite)
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/review?looked=1#card-ra_") {
				t.Fatalf("status %d, location %q", resp.StatusCode, loc)
			}
			_, body := s.page(t, "GET", "/review", alice, nil)
			card := body[strings.Index(body, `id="`+loc[strings.Index(loc, "#")+1:]+`"`):]
			card = card[:strings.Index(card, "</section>")]
			for _, want := range []string{"Found CRM-123", "Found CRM-123 → mark done", `name="crm_ref" maxlength="500" value="CRM-123"`} {
				if !strings.Contains(card, want) {
					t.Errorf("the card lacks %q:\n%s", want, card)
				}
			}
			resp, _ = s.pageWith(t, "POST", "/events/shop/found-2/lookup", alice, url.Values{"back": {"https://evil.example"}}, sameSite)
			if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/events/shop/found-2?looked=1") {
				t.Errorf("back elsewhere went to %q", loc)
			}
		})
		t.Run("a lookup from another site is refused", func(t *testing.T) {
			resp, _ := s.pageWith(t, "POST", "/events/shop/found-1/lookup", alice, url.Values{},
				map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
			if resp.StatusCode != 403 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if _, ev := s.call(t, "GET", "/v1/events/shop/found-1", nil); ev["history_counts"].(map[string]any)["lookup"] != nil {
				t.Fatal("a lookup was recorded")
			}
		})
		t.Run("found: one click marks it done, fenced by the version the page showed", func(t *testing.T) {
			_, page := s.page(t, "GET", "/events/shop/found-1", alice, nil)
			seen := versionRe.FindStringSubmatch(page)[1]
			resp, _ := s.pageWith(t, "POST", "/events/shop/found-1/lookup", alice, url.Values{"item": {""}}, sameSite)
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/events/shop/found-1?looked=1") {
				t.Fatalf("status %d, location %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			_, page = s.page(t, "GET", "/events/shop/found-1?looked=1", alice, nil)
			for _, want := range []string{"Found CRM-123", "Found CRM-123 → mark done", `name="crm_ref" value="CRM-123"`,
				`href="https://crm.example.com/o?id=found-1"`, "CRM lookup by alice (page): found CRM-123"} {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
			if v := versionRe.FindStringSubmatch(page)[1]; v != seen {
				t.Fatalf("the lookup moved the version %s → %s", seen, v)
			}
			// The one-click form, as the page carries it (the version the
			// person saw before the lookup: still good).
			form := url.Values{"to": {"done"}, "crm_ref": {"CRM-123"}, "holder": {"1"}, "version": {seen},
				"note": {"Found CRM-123 in the CRM (lookup by alice)"}}
			resp, body := s.pageWith(t, "POST", "/events/shop/found-1", alice, form, sameSite)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("status %d:\n%s", resp.StatusCode, body)
			}
			_, ev := s.call(t, "GET", "/v1/events/shop/found-1", nil)
			if ev["status"] != "done" || ev["crm_ref"] != "CRM-123" {
				t.Fatalf("event %v", ev)
			}
		})
		t.Run("not found: one click marks it failed; a stale page is refused", func(t *testing.T) {
			s.pageWith(t, "POST", "/events/shop/gone-1/lookup", alice, url.Values{}, sameSite)
			_, page := s.page(t, "GET", "/events/shop/gone-1", alice, nil)
			if !strings.Contains(page, "Not found → mark failed") {
				t.Fatalf("no one-click failed:\n%s", page)
			}
			seen := versionRe.FindStringSubmatch(page)[1]
			// The holder reports that it cannot tell: the entry moves on
			// (it waits for review now), and the form the person holds is
			// stale.
			s.outcome(t, map[string]any{"source": "shop", "event_id": "gone-1", "outcome": "unknown", "execution_id": "1"})
			form := url.Values{"to": {"failed"}, "holder": {"1"}, "version": {seen}, "note": {"Not found in the CRM"},
				"confirm": {"yes"}}
			resp, body := s.pageWith(t, "POST", "/events/shop/gone-1", alice, form, sameSite)
			if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "changed since the page was loaded") {
				t.Fatalf("status %d:\n%s", resp.StatusCode, body)
			}
			if !strings.Contains(body, "The entry changed since this lookup") {
				t.Errorf("the page still offers the old lookup's resolution")
			}
		})
	})
}

func TestLookupOfferedWhileFresh(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		var later atomic.Int64
		s := lookupServerAt(t, dialect, func() time.Time { return time.Now().Add(time.Duration(later.Load())) })
		alice := "alice:" + alicePassword
		s.claim(t, claimBody("shop", "gone-1", "1"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "gone-1", "outcome": "unknown", "execution_id": "1"})
		s.pageWith(t, "POST", "/events/shop/gone-1/lookup", alice, url.Values{}, sameSite)
		if _, page := s.page(t, "GET", "/events/shop/gone-1", alice, nil); !strings.Contains(page, "Not found → mark failed") {
			t.Fatalf("a fresh lookup is not offered:\n%s", page)
		}
		later.Store(int64(16 * time.Minute))
		_, page := s.page(t, "GET", "/events/shop/gone-1", alice, nil)
		if strings.Contains(page, "Not found → mark failed") || !strings.Contains(page, "over 15 minutes old") {
			t.Fatalf("a lookup of 16 minutes ago is offered:\n%s", page)
		}
		if !strings.Contains(page, "<strong>Not found</strong>") {
			t.Errorf("its answer is not shown")
		}
	})
}

func TestAuditLog(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := lookupServer(t, dialect)
		alice := "alice:" + alicePassword
		s.claim(t, claimBody("shop", "found-1", "1"))
		s.outcome(t, map[string]any{"source": "shop", "event_id": "found-1", "outcome": "unknown", "execution_id": "1"})
		s.callAs(t, aliceAuth, "POST", "/v1/events/shop/found-1/lookup", map[string]any{"actor": "alice"})
		s.pageWith(t, "POST", "/events/shop/found-1", alice, url.Values{"to": {"done"}, "holder": {"1"},
			"note": {"=HYPERLINK(\"http://evil\")"}}, sameSite)
		if resp, _ := s.page(t, "GET", "/audit-log", "@mallory:guess", nil); resp.StatusCode != 401 {
			t.Fatalf("a wrong password: %d", resp.StatusCode)
		}
		s.page(t, "GET", "/audit-log", "", nil) // no credentials: a browser's first request, not logged

		t.Run("JSON lists every person's action, newest first", func(t *testing.T) {
			code, out := s.callAs(t, aliceAuth, "GET", "/v1/audit-log", nil)
			if code != 200 {
				t.Fatalf("%d %v", code, out)
			}
			var got []string
			for _, e := range out["entries"].([]any) {
				m := e.(map[string]any)
				got = append(got, m["actor"].(string)+" "+m["via"].(string)+" "+m["action"].(string))
			}
			want := "@mallory page signin:refused|alice page resolution:done|alice api lookup:found"
			if strings.Join(got, "|") != want {
				t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
			}
		})
		t.Run("filters and bad filters", func(t *testing.T) {
			_, out := s.callAs(t, aliceAuth, "GET", "/v1/audit-log?action=lookup&actor=alice&source=shop", nil)
			if n := len(out["entries"].([]any)); n != 1 {
				t.Errorf("%d entries, want 1", n)
			}
			for _, q := range []string{"from=yesterday", "limit=0", "action=DROP", "cursor=zz", "format=xml"} {
				if code, _ := s.callAs(t, aliceAuth, "GET", "/v1/audit-log?"+q, nil); code != 422 {
					t.Errorf("%s: %d, want 422", q, code)
				}
			}
			_, out = s.callAs(t, aliceAuth, "GET", "/v1/audit-log?limit=1", nil)
			next, _ := out["next_cursor"].(string)
			_, out = s.callAs(t, aliceAuth, "GET", "/v1/audit-log?limit=5&cursor="+url.QueryEscape(next), nil)
			if n := len(out["entries"].([]any)); next == "" || n != 2 {
				t.Errorf("the next page has %d entries (cursor %q)", n, next)
			}
		})
		t.Run("CSV, by format or Accept, with no cell a formula", func(t *testing.T) {
			for _, h := range []map[string]string{{"format": "csv"}, {"accept": "text/csv"}} {
				req, _ := http.NewRequest("GET", s.URL+"/v1/audit-log?format="+h["format"], nil)
				req.Header.Set("Authorization", aliceAuth)
				if h["accept"] != "" {
					req.Header.Set("Accept", h["accept"])
				}
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
					t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				rows, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
				if err != nil || len(rows) != 4 || rows[0][0] != "at" {
					t.Fatalf("rows %q: %v", rows, err)
				}
				if rows[1][1] != "'@mallory" || !strings.HasPrefix(rows[2][8], "'=HYPERLINK") {
					t.Errorf("formula cells: %q %q", rows[1][1], rows[2][8])
				}
			}
			for q, want := range map[string]int{"format=csv&limit=1": 200, "format=csv&cursor=zz": 422} {
				req, _ := http.NewRequest("GET", s.URL+"/v1/audit-log?"+q, nil)
				req.Header.Set("Authorization", aliceAuth)
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				rows, _ := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
				switch {
				case resp.StatusCode != want:
					t.Errorf("%s: %d, want %d", q, resp.StatusCode, want)
				case want == 200 && (len(rows) != 2 || resp.Header.Get("X-Next-Cursor") == ""):
					t.Errorf("%s: rows %q, X-Next-Cursor %q", q, rows, resp.Header.Get("X-Next-Cursor"))
				case want == 422 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
					t.Errorf("%s: the error came as %s: %s", q, resp.Header.Get("Content-Type"), raw)
				}
			}
		})
		t.Run("the API is a person's: n8n's token is refused", func(t *testing.T) {
			if code, out := s.call(t, "GET", "/v1/audit-log", nil); code != 401 || out["entries"] != nil {
				t.Fatalf("%d %v", code, out)
			}
			eve := "Basic " + base64.StdEncoding.EncodeToString([]byte("eve:guess"))
			if code, _ := s.callAs(t, eve, "GET", "/v1/audit-log", nil); code != 401 {
				t.Fatalf("a wrong password: %d", code)
			}
			_, out := s.callAs(t, aliceAuth, "GET", "/v1/audit-log?actor=eve", nil)
			if e, _ := out["entries"].([]any); len(e) != 1 || e[0].(map[string]any)["action"] != "signin:refused" ||
				e[0].(map[string]any)["via"] != "api" {
				t.Errorf("the refused sign-in on the API is not in the log: %v", out)
			}
		})
		t.Run("the page's CSV link exports every entry its filters select, for the person signed in", func(t *testing.T) {
			_, body := s.page(t, "GET", "/audit-log?actor=alice&limit=1", alice, nil)
			m := regexp.MustCompile(`<a href="([^"]+)" download>`).FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no CSV link:\n%s", body)
			}
			link := strings.ReplaceAll(m[1], "&amp;", "&")
			resp, raw := s.page(t, "GET", link, alice, nil)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
				t.Fatalf("%s: %d %s", link, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			rows, err := csv.NewReader(strings.NewReader(raw)).ReadAll()
			if err != nil || len(rows) != 3 || rows[1][1] != "alice" || rows[2][3] != "lookup:found" {
				t.Fatalf("rows %q: %v", rows, err)
			}
			if resp, _ := s.page(t, "GET", link, "", nil); resp.StatusCode != 401 {
				t.Errorf("without a sign-in: %d", resp.StatusCode)
			}
		})
		t.Run("the page shows it, escaped, with the navigation's link", func(t *testing.T) {
			resp, body := s.page(t, "GET", "/audit-log?actor=alice", alice, nil)
			if resp.StatusCode != 200 || !strings.Contains(body, `href="/audit-log" aria-current="page"`) ||
				!strings.Contains(body, "lookup:found") || strings.Contains(body, "@mallory") {
				t.Fatalf("%d:\n%s", resp.StatusCode, body)
			}
			if resp, _ := s.page(t, "GET", "/audit-log?from=nope", alice, nil); resp.StatusCode != 422 {
				t.Errorf("a bad time: %d", resp.StatusCode)
			}
		})
	})
}

// TestAuditLogExportCutShort: a CSV export whose later read fails is cut
// off (the client sees the response end early), never finished as if the
// file were whole. A row whose time SQLite cannot read, older than a page
// of good ones, makes the second read fail.
func TestAuditLogExportCutShort(t *testing.T) {
	s := lookupServer(t, "sqlite")
	ctx := context.Background()
	for i := range 1100 {
		if err := people.Note(ctx, s.store, people.Action{At: time.Now().Add(-time.Duration(i) * time.Second),
			Actor: "guesser", Via: audit.ViaAPI, Action: people.ActionSignInRefused}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.store.DB().Exec(`INSERT INTO people_actions (at, actor, via, action, source, event_id, detail)
		VALUES ('0002-unreadable', 'guesser', 'api', 'signin:refused', '', '', '')`); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", s.URL+"/v1/audit-log?format=csv", nil)
	req.Header.Set("Authorization", aliceAuth)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err == nil || strings.Count(string(raw), "\n") < 1001 {
		t.Errorf("status %d, %d lines, read error %v: want 200, a page of lines, then the connection cut",
			resp.StatusCode, strings.Count(string(raw), "\n"), err)
	}
	req, _ = http.NewRequest("GET", s.URL+"/v1/audit-log?format=csv&limit=1000", nil)
	req.Header.Set("Authorization", aliceAuth)
	if resp, err := s.client.Do(req); err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Next-Cursor") == "" {
		t.Errorf("the first page alone: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
