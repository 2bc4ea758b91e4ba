package notify

import "testing"

func TestFit(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"short text stays", "abc", 3, "abc"},
		{"long text is cut with a mark", "abcdef", 4, "abc…"},
		{"an emoji counts two", "😀😀😀", 5, "😀😀…"},
		{"an escape is never cut in half", "ab&amp;cd", 6, "ab…"},
		{"a whole escape stays", "ab&amp;cdef", 9, "ab&amp;c…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fit(tc.in, tc.n); got != tc.want || length(got) > tc.n {
				t.Errorf("fit(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a & b", "a &amp; b"},
		{"<!channel>", "&lt;!channel&gt;"},
		{"<@U1>", "&lt;@U1&gt;"},
		{"<https://x|y>", "&lt;https://x|y&gt;"},
		{"@here and @Channel and @EVERYONE", "@\u2060here and @\u2060Channel and @\u2060EVERYONE"},
		{"mail@example.com", "mail@example.com"},
	}
	for _, tc := range tests {
		if got := escape(tc.in); got != tc.want {
			t.Errorf("escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
