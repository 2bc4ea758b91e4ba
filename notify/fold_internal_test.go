package notify

import (
	"slices"
	"strings"
	"testing"
)

// TestFold: texts past the n-1st share the last element, one a line, each
// cut to its share with the mark, so that none is dropped and the element
// stays within its size.
func TestFold(t *testing.T) {
	long := strings.Repeat("x", 50)
	cases := []struct {
		name  string
		texts []string
		want  []string
	}{
		{"fewer than the limit stay as they are", []string{"a", "b"}, []string{"a", "b"}},
		{"as many as the limit stay as they are", []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"one more shares the last", []string{"a", "b", "c", "d"}, []string{"a", "b", "c\nd"}},
		{"each text is cut to the size", []string{long, "b"}, []string{strings.Repeat("x", 19) + "…", "b"}},
		{"shared texts are cut to their share", []string{"a", "b", long, long},
			[]string{"a", "b", strings.Repeat("x", 8) + "…\n" + strings.Repeat("x", 8) + "…"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := fold(tc.texts, 3, 20)
			if !slices.Equal(got, tc.want) {
				t.Errorf("fold = %q, want %q", got, tc.want)
			}
			for _, s := range got {
				if length(s) > 20 {
					t.Errorf("%q is longer than 20", s)
				}
			}
		})
	}
}
