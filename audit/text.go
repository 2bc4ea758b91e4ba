package audit

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Replacement stands for what a database cannot store: NUL (PostgreSQL's
// text refuses it) and bytes that are not UTF-8.
const Replacement = "\uFFFD"

// CleanText returns s with NUL and invalid UTF-8 replaced by U+FFFD, and
// whether it changed anything. Both databases then store the same text.
func CleanText(s string) (string, bool) {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s, false
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, Replacement), "\x00", Replacement), true
}

// OneLine writes the control characters of a name out as text (a newline
// as \n, a bell as \x07, U+0085 as \u0085), and the line and paragraph
// separators with them, so that a name from outside stays on one line
// wherever it is shown: in a Slack field it cannot start a line of its own
// that reads like one of ours. Claims refuse such names; an error payload
// is recorded whatever it holds, so its names are written out instead.
func OneLine(s string) string {
	if strings.IndexFunc(s, breaksLine) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && breaksLine(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case breaksLine(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// breaksLine reports a control character or a line or paragraph separator.
func breaksLine(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// Truncate cuts s to at most n characters, marking the cut with "…".
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// HumanDuration writes a duration the way a person on call reads it:
// 42s, 17m, 5h 03m, 3d 04h. sep goes between the two units.
func HumanDuration(d time.Duration, sep string) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%s%02dm", int(d.Hours()), sep, int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%s%02dh", int(d.Hours())/24, sep, int(d.Hours())%24)
}
