package audit

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// renderTable writes Table as the Markdown table docs/design.md shows.
func renderTable() string {
	var b strings.Builder
	b.WriteString("| state | what happened | who | becomes | takes over | review | answer | line | alert | why |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	or := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	for _, r := range Table {
		take := ""
		if r.Take {
			take = "yes"
		}
		line, alert := or(r.Line, "—"), or(r.Alert, "—")
		if r.News {
			alert += " (news)"
		}
		cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | `%s` | %s | %s | %s |\n", cell(string(r.State)), cell(string(r.Act)),
			cell(string(r.Who)), or(string(r.Next), "="), take, or(r.Review, "="), r.Answer, line, alert, r.Why)
	}
	return b.String()
}

// TestDesignTableIsTheCode: the decision table in docs/design.md is
// audit.Table, row for row.
func TestDesignTableIsTheCode(t *testing.T) {
	raw, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start, end := strings.Index(doc, "<!-- decision-table -->\n"), strings.Index(doc, "<!-- /decision-table -->")
	if start < 0 || end < start {
		t.Fatal("docs/design.md has no <!-- decision-table --> block")
	}
	if got, want := doc[start+len("<!-- decision-table -->\n"):end], renderTable(); got != want {
		t.Errorf("docs/design.md's decision table is not audit.Table; it should read:\n%s", want)
	}
}
