package audit_test

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/retryaudit/retryaudit/audit"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"short", 10, "short"}, {"exactly10!", 10, "exactly10!"}, {"ünïcødé text", 5, "ünïc…"}} {
		if got := audit.Truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		sep  string
		want string
	}{
		{-time.Second, "", "0s"}, {42 * time.Second, "", "42s"}, {17 * time.Minute, " ", "17m"},
		{5*time.Hour + 3*time.Minute, " ", "5h 03m"}, {76 * time.Hour, "", "3d04h"},
	} {
		if got := audit.HumanDuration(tc.d, tc.sep); got != tc.want {
			t.Errorf("HumanDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"Orders to CRM":             "Orders to CRM",
		"orders\n*Status*\r\n":      `orders\n*Status*\r\n`,
		"a\tb\x07c\x00\x7f":         `a\tb\x07c\x00\x7f`,
		"nel\u0085ls\u2028ps\u2029": `nel\u0085ls\u2028ps\u2029`,
		"ünïcödé 🙂":                 "ünïcödé 🙂",
	} {
		if got := audit.OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
		if strings.IndexFunc(audit.OneLine(in), unicode.IsControl) >= 0 {
			t.Errorf("OneLine(%q) keeps a control character", in)
		}
	}
}
