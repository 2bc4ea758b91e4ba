package n8n

import (
	"slices"
	"strings"
	"time"

	"github.com/retryaudit/retryaudit/n8n/rules"
)

// Redacted replaces every credential the service finds in what n8n sends.
const Redacted = "[redacted]"

// CutUnchecked ends a text whose rest the redactor had no budget to check:
// it is dropped, never kept unchecked.
const CutUnchecked = "[cut: the rest was not checked for credentials]"

// scanTime is how long gitleaks' rules may spend on a text of n bytes:
// 4 ms per 16 KiB, at least 4 ms, so that RedactText stays within 5 ms per
// 16 KiB on this project's slow machine whatever a text holds. A text that
// needs more (the keywords of tens of services on every line) is cut where
// the time ran out, with CutUnchecked; a text that needs less than the
// rules' minimum of work (rules.Find) is never cut, however busy the
// machine.
func scanTime(n int) time.Duration {
	return max(1, time.Duration(n)/(16<<10)) * 4 * time.Millisecond
}

// RedactText replaces the credentials it recognises in free text, in one
// pass of each kind: the structural ones (values after credential-like
// names however quoted or escaped, URL and DSN passwords, curl's -u,
// authorization schemes, private keys, Slack webhook paths, long
// generated-looking runs) and the tokens of known services by gitleaks'
// rule set. A text the rules cannot check in their time is cut there, with
// CutUnchecked. RedactText(RedactText(s)) == RedactText(s).
func RedactText(s string) string {
	if len(s) < 4 {
		return s
	}
	spans := structuralSpans(s)
	found, checked := rules.Default().Find(s, time.Now().Add(scanTime(len(s))))
	for _, f := range found {
		spans = append(spans, span{f.Start, f.End})
	}
	cut := ""
	if checked < len(s) {
		s, cut = s[:checked], CutUnchecked
	}
	return replaceSpans(s, spans) + cut
}

// replaceSpans writes s with every span (merged where they overlap or
// touch) replaced by Redacted.
func replaceSpans(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); i++ {
		start, end := spans[i].start, min(spans[i].end, len(s))
		if start >= len(s) {
			break
		}
		for i+1 < len(spans) && spans[i+1].start <= end {
			i++
			end = max(end, min(spans[i].end, len(s)))
		}
		if start < last {
			start = last
		}
		if start >= end {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}
