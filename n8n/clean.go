package n8n

import "github.com/retryaudit/retryaudit/audit"

// cleanValue cleans every string and key of decoded JSON in place and
// reports whether any changed.
func cleanValue(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		changed := false
		for k, val := range t {
			nv, c := cleanValue(val)
			nk, ck := audit.CleanText(k)
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
		return audit.CleanText(t)
	}
	return v, false
}
