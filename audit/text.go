package audit

import (
	"fmt"
	"strings"
	"time"
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
