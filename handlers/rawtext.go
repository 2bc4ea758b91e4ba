package handlers

import (
	"strconv"
	"unicode/utf8"
)

// rawTextProblem checks a JSON string literal as it was sent, before
// encoding/json decodes it: the decoder turns invalid UTF-8 and lone
// surrogates (\ud800) into U+FFFD, so "inv-\xff" and "inv-\xfe" would become
// one key. It returns what is wrong, or "".
func rawTextProblem(raw []byte) string {
	if !utf8.Valid(raw) {
		return "must be valid UTF-8"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // \" \\ \n …
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			return "" // the decoder reports the malformed escape
		}
		i += 5
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return "must be valid UTF-8: it holds a lone surrogate (\\u" + strconv.FormatUint(uint64(r), 16) + ")"
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo, ok := hex4(raw, i+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 6
					continue
				}
			}
			return "must be valid UTF-8: it holds a lone surrogate (\\u" + strconv.FormatUint(uint64(r), 16) + ")"
		}
	}
	return ""
}

func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[at:at+4]), 16, 32)
	return rune(n), err == nil
}
