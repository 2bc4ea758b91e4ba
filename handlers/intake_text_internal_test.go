package handlers

import (
	"strings"
	"testing"
)

// TestVisibleText: what the decoder would replace by U+FFFD is written out
// as text inside strings, in keys too; everything else reads as it did.
func TestVisibleText(t *testing.T) {
	tests := []struct {
		name, body, want string
		visible          bool
	}{
		{"plain text", `{"a":"b \"q\" \\ é 🙂"}`, `b "q" \ é 🙂`, false},
		{"a byte that is not UTF-8", "{\"a\":\"7\xff\"}", `7\xff`, true},
		{"an overlong encoding", "{\"a\":\"\xc0\xaf\"}", `\xc0\xaf`, true},
		{"a truncated sequence before the quote", "{\"a\":\"x\xe2\x82\"}", `x\xe2\x82`, true},
		{"a lone high surrogate", `{"a":"7\ud800"}`, `7\ud800`, true},
		{"a lone low surrogate", `{"a":"\uDC00x"}`, `\uDC00x`, true},
		{"a high surrogate before another high one", `{"a":"\ud800\ud83d\ude00"}`, `\ud800😀`, true},
		{"a surrogate pair", `{"a":"\ud83d\ude00"}`, "😀", false},
		{"an escaped NUL", `{"a":"\u0000"}`, "\x00", false},
		{"a raw control character", "{\"a\":\"line\nbreak\x01\"}", "line\nbreak\x01", false},
		{"U+FFFD as sent", `{"a":"\ufffd` + "\uFFFD\"}", "\uFFFD\uFFFD", false},
		{"an escaped backslash before u", `{"a":"\\ud800"}`, `\ud800`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readErrorBody(strings.NewReader(tc.body), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if b.value["a"] != tc.want || b.visible != tc.visible {
				t.Errorf("%q (visible %v), want %q (%v)", b.value["a"], b.visible, tc.want, tc.visible)
			}
		})
	}
	t.Run("in a key", func(t *testing.T) {
		b, err := readErrorBody(strings.NewReader("{\"k\xfe\":1}"), 1<<20)
		if _, ok := b.value[`k\xfe`]; err != nil || !ok {
			t.Errorf("%v %v", b.value, err)
		}
	})
	t.Run("bytes outside strings are the decoder's to refuse", func(t *testing.T) {
		if _, err := readErrorBody(strings.NewReader("{\"a\":1\xff}"), 1<<20); err == nil {
			t.Error("accepted")
		}
	})
	t.Run("the hash and the size are of the bytes sent", func(t *testing.T) {
		a, _ := readErrorBody(strings.NewReader("{\"a\":\"\xff\"}"), 1<<20)
		b, _ := readErrorBody(strings.NewReader("{\"a\":\"\xfe\"}"), 1<<20)
		if a.size != 9 || a.sum == b.sum {
			t.Errorf("size %d, sums equal %v", a.size, a.sum == b.sum)
		}
	})
}
