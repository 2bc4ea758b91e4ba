package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/notify"
)

// sent is a message as the fake Slack received it, its blocks decoded.
type sent struct {
	Text    string
	Headers []string // header texts
	Fields  []string // section fields
	Plain   []string // plain_text section texts
	Mrkdwn  []string // mrkdwn section and context texts
	Buttons map[string]string
	All     []textObject // every text object
}

func decode(t *testing.T, c call) sent {
	t.Helper()
	s := sent{Text: c.Text, Buttons: map[string]string{}}
	if c.Blocks == "" {
		return s
	}
	var blocks []struct {
		Type     string          `json:"type"`
		Text     *textObject     `json:"text"`
		Fields   []textObject    `json:"fields"`
		Elements json.RawMessage `json:"elements"`
	}
	if err := json.Unmarshal([]byte(c.Blocks), &blocks); err != nil {
		t.Fatalf("blocks: %v\n%s", err, c.Blocks)
	}
	for _, b := range blocks {
		switch b.Type {
		case "header":
			s.Headers = append(s.Headers, b.Text.Text)
		case "section":
			if b.Text != nil && b.Text.Type == "plain_text" {
				s.Plain = append(s.Plain, b.Text.Text)
			} else if b.Text != nil {
				s.Mrkdwn = append(s.Mrkdwn, b.Text.Text)
			}
			for _, f := range b.Fields {
				s.Fields = append(s.Fields, f.Text)
			}
		case "context":
			var els []textObject
			json.Unmarshal(b.Elements, &els)
			for _, e := range els {
				s.Mrkdwn = append(s.Mrkdwn, e.Text)
			}
			s.All = append(s.All, els...)
		case "actions":
			var els []struct {
				Text textObject `json:"text"`
				URL  string     `json:"url"`
			}
			json.Unmarshal(b.Elements, &els)
			for _, e := range els {
				s.Buttons[e.Text.Text] = e.URL
			}
		}
		if b.Text != nil {
			s.All = append(s.All, *b.Text)
		}
		s.All = append(s.All, b.Fields...)
	}
	return s
}

var bareMention = regexp.MustCompile(`(?i)@(here|channel|everyone)`)

// checkSafe fails the test if text from outside could mention, link or
// format in mrkdwn: no '<' from outside, no bare mention, and every mrkdwn
// object taken verbatim.
func checkSafe(t *testing.T, s sent) {
	t.Helper()
	for _, text := range append(append([]string{s.Text}, s.Fields...), s.Mrkdwn...) {
		if strings.ContainsAny(text, "<>") {
			t.Errorf("mrkdwn holds a control character: %q", text)
		}
	}
	for _, text := range append(append(append([]string{s.Text}, s.Fields...), s.Mrkdwn...), s.Plain...) {
		if bareMention.MatchString(text) {
			t.Errorf("a bare mention reaches Slack: %q", text)
		}
	}
	for _, o := range s.All {
		if o.Type == "mrkdwn" && !o.Verbatim {
			t.Errorf("a mrkdwn text is not verbatim: %q", o.Text)
		}
	}
}

// TestHostileText asserts the exact text Slack receives for ids, names
// and messages written to mention everyone or to spoof a link.
func TestHostileText(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		ctx := context.Background()
		event := "@here <!channel> <@U1> <https://x|y> & ok"
		if _, err := r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: "4711",
			WorkflowID: "wf1", WorkflowName: "@channel's <flow>"}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.store.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event,
			Outcome: audit.OutcomeUnknown, ExecutionID: "4711", Reason: "@EVERYONE <https://evil|click> &"}); err != nil {
			t.Fatal(err)
		}
		r.drain(t)
		posts := r.slack.posts()
		if len(posts) != 1 {
			t.Fatalf("calls = %+v", r.slack.all())
		}
		s := decode(t, posts[0])
		const wj = "\u2060" // the word joiner that keeps @ from "here"
		want := "Outcome unknown: check the CRM: shop / @" + wj + "here &lt;!channel&gt; &lt;@U1&gt; &lt;https://x|y&gt; &amp; ok: " +
			"unknown by 4711: @" + wj + "EVERYONE &lt;https://evil|click&gt; &amp;"
		if s.Text != want {
			t.Errorf("text\n got %q\nwant %q", s.Text, want)
		}
		for _, f := range []string{
			"*Event ID*\n@" + wj + "here &lt;!channel&gt; &lt;@U1&gt; &lt;https://x|y&gt; &amp; ok",
			"*Workflow*\n@" + wj + "channel's &lt;flow&gt;",
		} {
			if !containsString(s.Fields, f) {
				t.Errorf("no field %q in %q", f, s.Fields)
			}
		}
		// plain_text shows what it holds: no escapes, no mention.
		if m := "unknown by 4711: @" + wj + "EVERYONE <https://evil|click> &"; !containsString(s.Plain, m) {
			t.Errorf("no plain text %q in %q", m, s.Plain)
		}
		if len(s.Headers) != 1 || s.Headers[0] != "Outcome unknown: check the CRM" {
			t.Errorf("headers = %q", s.Headers)
		}
		wantURL := "https://retryaudit.example/events/shop/@here%20%3C%21channel%3E%20%3C@U1%3E%20%3Chttps:%2F%2Fx%7Cy%3E%20&%20ok"
		if s.Buttons["Audit row"] != wantURL {
			t.Errorf("audit link %q, want %q", s.Buttons["Audit row"], wantURL)
		}
		checkSafe(t, s)
	})
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestLongUnicodeEventID: a 500-character non-ASCII event id escapes to a
// URL longer than a Slack button allows. The alert is delivered whole, with
// a short audit link that leads, after sign-in, to the event's page.
func TestLongUnicodeEventID(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		h, err := handlers.New(handlers.Config{Store: r.store, Token: "t",
			UI: handlers.UIConfig{TrustHeader: "X-User", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
		if err != nil {
			t.Fatal(err)
		}
		pages := httptest.NewServer(h.Engine())
		defer pages.Close()
		r.links.BaseURL = pages.URL
		r.worker = r.newWorker(t, r.store, false, "worker-1")

		event := strings.Repeat("日本/ü", 125)
		if n := len([]rune(event)); n != 500 {
			t.Fatalf("the id has %d characters", n)
		}
		if long := (audit.Links{BaseURL: pages.URL}).Event("shop", event); len(long) <= 3000 {
			t.Fatalf("the event's URL is only %d long: the test proves nothing", len(long))
		}
		r.unknown(t, event)
		r.drain(t)
		posts := r.slack.posts()
		if len(posts) != 1 || posts[0].Blocks == "" {
			t.Fatalf("calls = %+v", r.slack.all())
		}
		s := decode(t, posts[0])
		if !containsString(s.Fields, "*Event ID*\n"+event) {
			t.Errorf("the event id is not shown whole: %q", s.Fields)
		}
		var row int64
		r.store.DB().Get(&row, `SELECT id FROM outbox WHERE kind = 'alert'`)
		link := s.Buttons["Audit row"]
		if link != fmt.Sprintf("%s/e/%d", pages.URL, row) {
			t.Fatalf("audit link %q", link)
		}
		if strings.Contains(r.logs.String(), "refused") {
			t.Errorf("Slack refused the message:\n%s", r.logs.String())
		}

		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func(url, user string) *http.Response {
			req, _ := http.NewRequest("GET", url, nil)
			if user != "" {
				req.Header.Set("X-User", user)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return resp
		}
		if resp := get(link, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the short link without sign-in: %d", resp.StatusCode)
		}
		resp := get(link, "alice")
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("the short link: %d", resp.StatusCode)
		}
		page := get(pages.URL+resp.Header.Get("Location"), "alice")
		var body strings.Builder
		buf := make([]byte, 1<<16)
		for {
			n, err := page.Body.Read(buf)
			body.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if page.StatusCode != http.StatusOK || !strings.Contains(body.String(), html.EscapeString(event)) {
			t.Errorf("the event's page: %d, shows the id: %v", page.StatusCode, strings.Contains(body.String(), html.EscapeString(event)))
		}
	})
}

// TestRefusedMessage: when Slack refuses the message as built
// (invalid_blocks), the error is logged and a minimal message goes out
// instead: nothing is dead-lettered.
func TestRefusedMessage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		for _, webhook := range []bool{false, true} {
			t.Run(fmt.Sprintf("webhook %v", webhook), func(t *testing.T) {
				r := newRig(t, dialect, webhook)
				r.slack.setFail(func(c call) (int, map[string]string, string) {
					switch {
					case c.Blocks == "":
					case c.Method == "chat.postMessage":
						return 200, nil, `{"ok":false,"error":"invalid_blocks"}`
					case c.Method == "webhook":
						return 400, nil, "invalid_blocks"
					}
					return 0, nil, ""
				})
				r.unknown(t, "order-f1")
				r.drain(t)
				posts := r.slack.posts()
				if len(posts) != 1 {
					t.Fatalf("calls = %+v", r.slack.all())
				}
				want := "retryaudit alert (Slack refused the full message): shop / order-f1 <https://retryaudit.example/e/1|Audit row>"
				if posts[0].Text != want || posts[0].Blocks != "" {
					t.Errorf("fallback %q (blocks %q), want %q", posts[0].Text, posts[0].Blocks, want)
				}
				if got := r.states(t); got["sent"] != 1 {
					t.Errorf("states = %v", got)
				}
				if !strings.Contains(r.logs.String(), "level=ERROR") || !strings.Contains(r.logs.String(), "invalid_blocks") {
					t.Errorf("the refusal is not logged as an error:\n%s", r.logs.String())
				}
			})
		}
	})
}

// TestExecutionLinks: the n8n button is built from the configured editor
// URL only, for a linked error as for one linked to nothing; the URL a
// payload brings is shown as text naming its host, and only when no link
// can be built from the editor URL (none is set, or the payload names no
// workflow).
func TestExecutionLinks(t *testing.T) {
	const evil = "https://evil.example/phish"
	payloadText := "Link in n8n's payload, not checked (host *evil.example*): `" + evil + "`"
	cases := []struct {
		name   string
		editor string
		linked bool
		button string // the n8n button's URL, "" for none
		text   bool   // the payload's URL shown as text
		noWF   bool   // the payload names no workflow
	}{
		{"a linked error with an editor URL", "https://n8n.example", true, "https://n8n.example/workflow/wf1/executions/4711", false, false},
		{"a linked error without one", "", true, "", true, false},
		{"an unlinked error with an editor URL", "https://n8n.example", false, "https://n8n.example/workflow/wf9/executions/900", false, false},
		{"an unlinked error without one", "", false, "", true, false},
		{"an unlinked error naming no workflow, with an editor URL", "https://n8n.example", false, "", true, true},
	}
	audittest.Each(t, func(t *testing.T, dialect string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := newRig(t, dialect, false)
				r.links.N8NEditorURL = tc.editor
				r.worker = r.newWorker(t, r.store, false, "worker-1")
				ctx := context.Background()
				exec, wf := "900", "wf9"
				if tc.noWF {
					wf = ""
				}
				if tc.linked {
					exec, wf = "4711", "wf1"
					if _, err := r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "order-l", ExecutionID: exec,
						WorkflowID: wf, WorkflowName: "Orders to CRM"}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := r.store.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + exec,
					ExecutionID: exec, WorkflowID: wf, Node: "CRM", Message: "timeout", URL: evil, Mode: "webhook"}); err != nil {
					t.Fatal(err)
				}
				r.clock.Advance(time.Minute) // past the grace of an unlinked error
				r.drain(t)
				posts := r.slack.posts()
				if len(posts) != 1 {
					t.Fatalf("calls = %+v", r.slack.all())
				}
				s := decode(t, posts[0])
				if got := s.Buttons["n8n execution"]; got != tc.button {
					t.Errorf("n8n button %q, want %q", got, tc.button)
				}
				if containsString(s.Mrkdwn, payloadText) != tc.text {
					t.Errorf("payload link shown: %v, want %v (%q)", !tc.text, tc.text, s.Mrkdwn)
				}
				for _, u := range s.Buttons {
					if strings.Contains(u, "evil") {
						t.Errorf("a button goes to %s", u)
					}
				}
			})
		}
	})
}

// TestLimits renders alerts with every field at its longest and checks
// the messages against Slack's limits, as the fake Slack does, and that
// what did not fit is shown cut or folded, never dropped: an event alert's
// eleven fields fold the last two into the tenth, a text past its limit
// ends in "…", and a link too long for a button becomes the short /e/{id}
// link or, without an outbox row to redirect by, a note in the footer.
func TestLimits(t *testing.T) {
	long := func(n int) string { return string([]rune(strings.Repeat("é&<", n/3+1))[:n]) }
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	huge := audit.Alert{Source: strings.Repeat("s", 100), EventID: strings.Repeat("日", 500), Item: strings.Repeat("i", 200),
		Status: audit.StatusProcessing, Since: at.Add(-time.Hour), WorkflowID: strings.Repeat("w", 100),
		WorkflowName: strings.Repeat("😀", 500), Node: strings.Repeat("n", 3000), ExecutionID: strings.Repeat("9", 100),
		RetryOf: strings.Repeat("8", 100), ErrorKind: "execution_error", Message: long(4000), Resolution: long(4000),
		N8NURL: "https://n8n.example/" + strings.Repeat("p", 3000), Deliveries: 7, At: at}
	r := notify.NewRenderer(audit.Links{BaseURL: "https://retryaudit.example", CRM: map[string]string{
		huge.Source: "https://crm.example/{event_id}"}}, func() time.Time { return at })
	const (
		auditNote = "… *Audit row*: no button, its address is longer than the 3,000 characters Slack allows; " +
			"search the event's id in the events list."
		crmNote = "… *CRM order*: no button, its address is longer than the 3,000 characters Slack allows; " +
			"the audit row's page links it."
	)
	eventLabels := []string{"Source", "Event ID", "Item", "Status", "Kind", "Workflow", "Failed node", "Execution",
		"Retry of", "Deliveries", "Processing for"}
	for _, kind := range []string{audit.AlertExecutionError, audit.AlertUnknown, audit.AlertStale, audit.AlertFingerprint,
		audit.AlertNotHolder, audit.AlertUnlinkedError, audit.AlertNews} {
		for _, row := range []int64{0, 42} {
			t.Run(fmt.Sprintf("%s, outbox row %d", kind, row), func(t *testing.T) {
				a := huge
				a.Kind = kind
				event := kind != audit.AlertUnlinkedError
				if !event {
					a.Source, a.EventID, a.ErrorID, a.Group, a.Count = "", "", 12, "g", 17
				}
				m := r.RenderRow(a, row)
				raw, err := json.Marshal(m.Blocks)
				if err != nil {
					t.Fatal(err)
				}
				if bad := invalidBlocks(m.Text, string(raw)); bad != "" {
					t.Fatalf("Slack would answer %s:\n%s", bad, raw)
				}
				if utf16Len(m.Text) > 3000 || !strings.HasSuffix(m.Text, "…") {
					t.Errorf("the notification text is %d long and ends %q", utf16Len(m.Text), m.Text[len(m.Text)-8:])
				}
				if strings.Contains(string(raw), "&amp…") || strings.Contains(string(raw), "&lt…") {
					t.Errorf("an escape was cut in half")
				}
				s := decode(t, call{Text: m.Text, Blocks: string(raw)})
				checkSafe(t, s)

				// The message and the resolution are cut to a section's
				// 3,000, with the mark.
				if len(s.Plain) != 2 {
					t.Fatalf("plain sections %d, want the message and the resolution", len(s.Plain))
				}
				for _, p := range s.Plain {
					if n := utf16Len(p); n > 3000 || n < 2990 || !strings.HasSuffix(p, "…") {
						t.Errorf("a plain section is %d long and ends %q", utf16Len(p), p[len(p)-8:])
					}
				}
				// The node's 3,000 characters are cut to a field's 2,000.
				node := "*Failed node*\n" + strings.Repeat("n", 2000-len("*Failed node*\n")-1) + "…"
				if !containsString(s.Fields, node) {
					t.Errorf("the node's field is not cut to 2,000 with a mark: %q", s.Fields)
				}
				if !event {
					if len(s.Fields) != 5 {
						t.Errorf("fields = %q", s.Fields)
					}
					return
				}
				// Eleven fields: the last two share the tenth.
				if len(s.Fields) != 10 {
					t.Fatalf("%d fields, want 10", len(s.Fields))
				}
				for i, label := range eventLabels[:9] {
					if !strings.HasPrefix(s.Fields[i], "*"+label+"*\n") {
						t.Errorf("field %d is %.40q, want %s", i, s.Fields[i], label)
					}
				}
				if want := "*Deliveries*\n7\n*Processing for*\n1h 00m"; s.Fields[9] != want {
					t.Errorf("the tenth field is %q, want %q", s.Fields[9], want)
				}

				// The audit link: the short /e/{row} when there is a row to
				// redirect by, else a note that says where to look.
				if row != 0 {
					if got := s.Buttons["Audit row"]; got != "https://retryaudit.example/e/42" {
						t.Errorf("audit button %q", got)
					}
					if containsString(s.Mrkdwn, auditNote) {
						t.Errorf("a note for an audit link that is there")
					}
				} else {
					if _, ok := s.Buttons["Audit row"]; ok {
						t.Errorf("an audit button without a row: %q", s.Buttons["Audit row"])
					}
					if !containsString(s.Mrkdwn, auditNote) {
						t.Errorf("no note for the audit link left out: %q", s.Mrkdwn)
					}
				}
				// The CRM's link has no short form: it is left out, with a note.
				if _, ok := s.Buttons["CRM order"]; ok || !containsString(s.Mrkdwn, crmNote) {
					t.Errorf("CRM button %q, notes %q", s.Buttons["CRM order"], s.Mrkdwn)
				}
			})
		}
	}
}
