package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The reading half of TestDocsAreTrue: the pages as text, and what they
// name in their code (fenced blocks and inline spans), their links and
// their headings' anchors. A small reader of the Markdown we write, not a
// full CommonMark parser.

// repoRoot is the repository, seen from cmd/retryaudit where the test runs.
const repoRoot = "../.."

// docPage is one documentation page; path is from the repository's root
// (README.md, docs/api.md).
type docPage struct {
	path, text string
}

// readDocPages reads README.md and every page in docs/.
func readDocPages(t *testing.T) []docPage {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	var pages []docPage
	for _, p := range append([]string{filepath.Join(repoRoot, "README.md")}, paths...) {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		pages = append(pages, docPage{path: filepath.ToSlash(rel), text: string(raw)})
	}
	return pages
}

// docParts is a page split into what is code and what is prose.
type docParts struct {
	blocks []string // fenced code blocks, without the fences
	spans  []string // inline code spans, whitespace made single spaces
	prose  string   // everything outside fenced blocks (spans included)
	heads  []string // the headings' texts, in order
}

var spanRe = regexp.MustCompile("`([^`]+)`")

func (p docPage) parts() docParts {
	var d docParts
	var prose, block []string
	fenced := false
	for _, line := range strings.Split(p.text, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			if fenced {
				d.blocks = append(d.blocks, strings.Join(block, "\n"))
				block = nil
			}
			fenced = !fenced
		case fenced:
			block = append(block, line)
		default:
			prose = append(prose, line)
			if h, ok := strings.CutPrefix(line, "#"); ok {
				d.heads = append(d.heads, strings.TrimSpace(strings.TrimLeft(h, "#")))
			}
		}
	}
	d.prose = strings.Join(prose, "\n")
	for _, m := range spanRe.FindAllStringSubmatch(d.prose, -1) {
		d.spans = append(d.spans, strings.Join(strings.Fields(m[1]), " "))
	}
	return d
}

// code is every piece of code on the page: the spans, and the blocks line
// by line with shell comments cut off.
func (d docParts) code() []string {
	out := append([]string(nil), d.spans...)
	for _, b := range d.blocks {
		for _, line := range strings.Split(b, "\n") {
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			out = append(out, line)
		}
	}
	return out
}

var linkRe = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// links are the targets of the page's links and images.
func (d docParts) links() []string {
	var out []string
	for _, m := range linkRe.FindAllStringSubmatch(spanRe.ReplaceAllString(d.prose, "code"), -1) {
		out = append(out, m[1])
	}
	return out
}

// anchors are the fragments GitHub gives the page's headings: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered.
func (d docParts) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range d.heads {
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
