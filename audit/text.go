package audit

import (
	"fmt"
	"time"
	"unicode/utf8"
)

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
