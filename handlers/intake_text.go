package handlers

import (
	"bufio"
	"fmt"
	"io"
	"unicode/utf8"
)

// visibleText rewrites, inside the JSON strings of an error body as it
// streams past, what encoding/json would otherwise turn into U+FFFD without
// a word: a byte that is not UTF-8 becomes the text \xff, a lone surrogate
// escape (\ud800 without its low half, or a low half alone) the text \ud800.
// Decoded, "7\xff" and "7\xfe" would be one execution id and one dedupe
// key; written out, they stay two, and a person can see what was sent. A
// raw control character, which JSON forbids in a string but an error
// workflow that builds its body from an expression can still send, becomes
// its \u00XX escape: the same character, decoded. Everything outside
// strings passes as it is: the decoder judges it.
type visibleText struct {
	r       *bufio.Reader
	out     []byte // rewritten, not read yet
	inStr   bool
	escaped bool // a byte or an escape was written out visibly
	err     error
}

func newVisibleText(r io.Reader) *visibleText {
	return &visibleText{r: bufio.NewReader(r)}
}

func (v *visibleText) Read(p []byte) (int, error) {
	if len(v.out) == 0 && v.err == nil {
		v.fill()
	}
	if len(v.out) == 0 {
		return 0, v.err
	}
	n := copy(p, v.out)
	v.out = v.out[n:]
	return n, nil
}

// fill rewrites the next few KiB.
func (v *visibleText) fill() {
	v.out = v.out[:0]
	for len(v.out) < 4096 {
		c, err := v.r.ReadByte()
		if err != nil {
			v.err = err
			return
		}
		switch {
		case !v.inStr:
			v.out = append(v.out, c)
			v.inStr = c == '"'
		case c == '"':
			v.out = append(v.out, c)
			v.inStr = false
		case c == '\\':
			v.escape()
		case c < 0x20:
			v.out = fmt.Appendf(v.out, `\u%04x`, c)
		case c < utf8.RuneSelf:
			v.out = append(v.out, c)
		default:
			v.r.UnreadByte()
			b, _ := v.r.Peek(utf8.UTFMax) // fewer at the end of the body
			r, size := utf8.DecodeRune(b)
			if r == utf8.RuneError && size <= 1 {
				v.out = fmt.Appendf(v.out, `\\x%02x`, b[0])
				v.escaped, size = true, 1
			} else {
				v.out = append(v.out, b[:size]...)
			}
			v.r.Discard(size)
		}
	}
}

// escape copies the escape whose backslash was read. A lone surrogate is
// written as its text (the backslash escaped); a malformed escape is left
// for the decoder to report.
func (v *visibleText) escape() {
	b, _ := v.r.Peek(5) // uXXXX
	if len(b) == 0 {
		v.out = append(v.out, '\\')
		return
	}
	r, ok := hex4(b, 1)
	if b[0] != 'u' || !ok {
		v.out = append(v.out, '\\', b[0])
		v.r.Discard(1)
		return
	}
	if r >= 0xD800 && r <= 0xDBFF {
		if pair, _ := v.r.Peek(11); len(pair) == 11 && pair[5] == '\\' && pair[6] == 'u' {
			if lo, ok := hex4(pair, 7); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				v.out = append(append(v.out, '\\'), pair...)
				v.r.Discard(11)
				return
			}
		}
	}
	v.out = append(v.out, '\\')
	if r >= 0xD800 && r <= 0xDFFF {
		v.out = append(v.out, '\\')
		v.escaped = true
	}
	v.out = append(v.out, b...)
	v.r.Discard(5)
}
