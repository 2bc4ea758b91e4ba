package n8n_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

// fakeOK is what a hostile n8n writes to clear the operator's screen and
// print a line connect never printed.
const fakeOK = "\x1b[2J\x1b[H\x1b]0;retryaudit\x07\rok    n8n API        all good, nothing to see\n"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain words stay", "Workflow has no node named Webhook", "Workflow has no node named Webhook"},
		{"unicode stays", "Überweisung → 🚀 fehlgeschlagen", "Überweisung → 🚀 fehlgeschlagen"},
		{"a screen clear and a fake ok line", fakeOK, "ok    n8n API        all good, nothing to see"},
		{"colours", "\x1b[31;1mred\x1b[0m text", "red text"},
		{"CSI with intermediates", "a\x1b[?25lb\x1b[1 qc", "abc"},
		{"8-bit CSI", "a\u009b2Jb", "ab"},
		{"an OSC hyperlink ended by ST", "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"an 8-bit OSC ended by 8-bit ST", "a\u009d0;title\u009cb", "ab"},
		{"a DCS string", "a\x1bPq#0;2;0;0;0\x1b\\b", "ab"},
		{"an APC string that never ends", "a\x1b_hidden forever", "a"},
		{"two-byte escapes", "a\x1bcb\x1b(Bc\x1b7d", "abcd"},
		{"a lone ESC at the end", "abc\x1b", "abc"},
		{"backspaces and bells", "o\bk\a!", "ok!"},
		{"line breaks become spaces", "first\r\nsecond\tthird", "first  second third"},
		{"bidirectional overrides", "file\u202Egnp.exe", "filegnp.exe"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"DEL", "a\x7fb", "ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := n8n.Printable(tc.in, 0); got != tc.want {
				t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	t.Run("a long text is cut with an ellipsis", func(t *testing.T) {
		got := n8n.Printable(strings.Repeat("é", 1000), n8n.MaxSaid)
		if utf8.RuneCountInString(got) != n8n.MaxSaid || !strings.HasSuffix(got, "é…") {
			t.Errorf("%d characters, ending %q", utf8.RuneCountInString(got), got[len(got)-8:])
		}
		if got := n8n.Printable("short", n8n.MaxSaid); got != "short" {
			t.Errorf("a short text became %q", got)
		}
	})
	t.Run("lines stay when asked", func(t *testing.T) {
		if got := n8n.Strip("one\r\ntwo\x1b[K\n", true); got != "one\ntwo\n" {
			t.Errorf("Strip = %q", got)
		}
	})
}

// TestConnectPrintsN8NsWordsSafely: n8n's error messages and the names it
// holds reach connect's words without escape codes, cut to n8n.MaxSaid.
func TestConnectPrintsN8NsWordsSafely(t *testing.T) {
	hostile := strings.Repeat("x", 5000) + fakeOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		json.NewEncoder(w).Encode(map[string]any{"message": fakeOK + hostile})
	}))
	defer srv.Close()
	_, err := n8n.PlanWiring(context.Background(), n8n.NewAdmin(srv.URL+"/api/v1", fakeKey), n8n.Wiring{})
	if err == nil {
		t.Fatal("a refused key planned")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\x1b\r\n\a") || len(msg) > 1000 || !strings.Contains(msg, "…") ||
		!strings.Contains(msg, "refused the API key (403 ok    n8n API") {
		t.Errorf("the error printed is %d bytes: %q", len(msg), msg)
	}
}

// TestPlansPrintN8NsNamesSafely: the names and ids connect prints in its
// plan come from n8n: no escape codes, at most n8n.MaxSaid characters.
func TestPlansPrintN8NsNamesSafely(t *testing.T) {
	f := n8ntest.NewFake(t)
	id := f.AddWorkflow(userWorkflow(fakeOK+strings.Repeat("long name ", 100), "orders"), true)
	other := userWorkflow("\x1b[31mOther\x1b[0m", "other")
	other["settings"].(map[string]any)["errorWorkflow"] = "\x1b]0;pwned\x07someone-else"
	f.AddWorkflow(other, true)
	p, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{id}, AllActive: true})
	if err != nil {
		t.Fatal(err)
	}
	said := whats(p) + "\n" + strings.Join(p.Kept, "\n")
	if strings.ContainsAny(said, "\x1b\r\a") || strings.Contains(said, strings.Repeat("long name ", 40)) ||
		!strings.Contains(said, `"ok    n8n API`) || !strings.Contains(said, `"Other" (`) ||
		!strings.Contains(said, "keeps its own error workflow someone-else:") {
		t.Errorf("the plan says:\n%q", said)
	}
}
