package audit

import (
	"strings"
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

// cleanValue cleans every string and key of decoded JSON in place and
// reports whether any changed.
func cleanValue(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		changed := false
		for k, val := range t {
			nv, c := cleanValue(val)
			nk, ck := CleanText(k)
			if ck {
				delete(t, k)
			}
			if c || ck {
				t[nk] = nv
				changed = true
			}
		}
		return t, changed
	case []any:
		changed := false
		for i, val := range t {
			nv, c := cleanValue(val)
			t[i] = nv
			changed = changed || c
		}
		return t, changed
	case string:
		return CleanText(t)
	}
	return v, false
}
