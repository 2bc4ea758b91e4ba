package n8n

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxSaid is how many characters of one text from n8n (an error message,
// a name, an id) connect prints: n8n's own messages are one sentence.
const MaxSaid = 300

// said is text from n8n as connect prints it.
func said(s string) string { return Printable(s, MaxSaid) }

// Printable returns text from n8n as it may reach a terminal on one
// line: terminal escape sequences (CSI, OSC, DCS and the rest, in their
// 7-bit and 8-bit forms) and control characters removed, line breaks and
// tabs made spaces, bidirectional overrides removed, invalid UTF-8
// replaced, and at most limit characters, the last an ellipsis when it
// was longer. A limit of 0 keeps the length.
func Printable(s string, limit int) string {
	s = strings.TrimSpace(Strip(s, false))
	if limit > 0 && utf8.RuneCountInString(s) > limit {
		n := 0
		for i := range s {
			if n == limit-1 {
				return s[:i] + "…"
			}
			n++
		}
	}
	return s
}

// Strip removes terminal escape sequences and control characters from s;
// with keepLines, line breaks stay (tabs become spaces), for text of
// several lines.
func Strip(s string, keepLines bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' && keepLines:
			b.WriteByte('\n')
		case r == '\n' || r == '\r' || r == '\t':
			if !keepLines || r == '\t' {
				b.WriteByte(' ')
			}
		case r == 0x1b: // ESC: what follows says how long the sequence is
			i = skipEscape(s, i)
		case r == 0x9b: // CSI in its 8-bit form
			i = skipCSI(s, i)
		case r == 0x90 || r == 0x98 || r == 0x9d || r == 0x9e || r == 0x9f: // DCS, SOS, OSC, PM, APC
			i = skipString(s, i)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// skipEscape returns where the sequence after an ESC at s[:i] ends.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_':
		return skipString(s, i+1)
	}
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f { // intermediate bytes, as in ESC ( B
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipCSI returns where a control sequence's parameters end: at its final
// byte (0x40-0x7e), included, or at anything that cannot be in one.
func skipCSI(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
		i++
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipString returns where a string sequence (OSC, DCS, …) ends: after
// BEL, ESC \ or the 8-bit ST, or at the end of s.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case strings.HasPrefix(s[i:], "\u009c"):
			return i + len("\u009c")
		}
		i++
	}
	return i
}
