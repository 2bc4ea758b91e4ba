package rules

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/zricethezav/gitleaks/v8/config"
)

// Span is a secret found in a text: its bytes [Start, End) and the rule
// that found it.
type Span struct {
	Start, End int
	Rule       string
}

// window is a part of the text one rule is run on; anchored, the rule's
// anchored expression is tried at its start only.
type window struct {
	rule, start, end int
	anchored         bool
}

// Find returns the secrets the rules find in text, in order of the text,
// until the deadline. A rule runs only where it can match (found in one
// pass for all rules): anchored where a literal its matches start with
// stands, else on the bytes around its keywords that a match could span.
// Go's matcher costs from a few nanoseconds to microseconds per byte
// depending on the rule, so the budget is time: at the deadline, once it
// has done minScan of work, Find stops before the next piece and returns
// how far the text was checked; checked < len(text) means that the rest
// was not looked at.
func (s *Set) Find(text string, deadline time.Time) (spans []Span, checked int) {
	scanned := 0
	for _, w := range s.windows(text) {
		if scanned >= minScan && time.Now().After(deadline) {
			return spans, w.start
		}
		spans = s.run(spans, text, w)
		scanned += w.end - w.start
	}
	return spans, len(text)
}

// minScan is the work Find always does before its deadline may stop it, in
// bytes of windows: a text that needs no more (every error message n8n
// writes) is checked whole however busy the machine is, so that it is
// redacted the same on every machine and every time. Past it, the
// deadline bounds what a text full of keywords costs.
const minScan = 32 << 10

// windows returns, in the order of the text, the work for each rule.
func (s *Set) windows(text string) []window {
	lower := ASCIILower(text)
	var all []window
	open := map[int]int{} // rule → index in all of its last unanchored window
	tried := map[[2]int]bool{}
	add := func(rule, start, end int) {
		// Windows that overlap merge, up to maxWindow: past it a new one
		// starts, so that a budget that runs out cuts the text late.
		if i, ok := open[rule]; ok && all[i].end >= start && end-all[i].start <= maxWindow {
			all[i].end = max(all[i].end, end)
			return
		}
		open[rule] = len(all)
		all = append(all, window{rule: rule, start: start, end: end})
	}
	for _, r := range s.always {
		add(r, 0, len(text))
	}
	for _, m := range s.trie.MatchString(lower) {
		at, k := int(m.Pos()), int(m.Pattern())
		kw := s.keywords[k]
		for _, r := range s.byKeyword[k] {
			rule := &s.rules[r]
			add(r, max(0, at-min(rule.before, maxWindow)), wordEnd(text, min(len(text), at+len(kw)+min(rule.after, maxWindow))))
		}
		for _, r := range s.byLead[k] {
			rule := &s.rules[r]
			if tried[[2]int{r, at}] || rule.wordStart && at > 0 && reWord(text[at-1]) && reWord(text[at]) {
				continue
			}
			tried[[2]int{r, at}] = true
			all = append(all, window{rule: r, start: at, anchored: true,
				end: wordEnd(text, min(len(text), at+min(rule.after, maxReach)))})
		}
	}
	slices.SortStableFunc(all, func(a, b window) int { return a.start - b.start })
	return all
}

// maxWindow is the most bytes windows merge into.
const maxWindow = 4 << 10

// maxReach is how far an anchored match is looked for at first: a match
// without a longest length (a JWT, a private key, gitleaks' curl rules'
// .*?) that reaches it is looked for further (see run).
const maxReach = 1 << 10

// wordEnd moves a window's end past the token it would cut, so that a
// longer token cut short does not look like a whole one.
func wordEnd(text string, end int) int {
	for limit := min(len(text), end+256); end < limit && wordByte(text[end]); end++ {
	}
	return end
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '+' ||
		c == '/' || c == '='
}

// reWord is a word character as \b reads it.
func reWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// run runs one rule on one window and appends what it finds. A match that
// reaches the window's end may be longer than the window: the window then
// doubles, up to the end of the text.
func (s *Set) run(spans []Span, text string, w window) []Span {
	r := &s.rules[w.rule]
	var matches [][]int
	for {
		if w.anchored {
			matches = nil
			if m := r.anchored.FindStringSubmatchIndex(text[w.start:w.end]); m != nil {
				matches = [][]int{m}
			}
		} else {
			matches = r.rule.Regex.FindAllStringSubmatchIndex(text[w.start:w.end], -1)
		}
		if w.end == len(text) || len(matches) == 0 || w.start+matches[len(matches)-1][1] < w.end {
			break
		}
		w.end = wordEnd(text, min(len(text), w.start+2*(w.end-w.start)))
	}
	part := text[w.start:w.end]
	for _, m := range matches {
		start, end := secretGroup(r, m)
		if start < 0 {
			continue
		}
		secret, match := part[start:end], part[m[0]:m[1]]
		if r.rule.Entropy > 0 && entropy(secret) <= r.rule.Entropy {
			continue
		}
		if s.allowed(r.rule.Allowlists, secret, match, lineOf(part, m[0], m[1]), true) ||
			s.allowed(s.global, secret, match, lineOf(part, m[0], m[1]), false) {
			continue
		}
		spans = append(spans, Span{Start: w.start + start, End: w.start + end, Rule: r.ID})
	}
	return spans
}

// secretGroup picks the secret out of a match as gitleaks does: the rule's
// group, else the first group that matched, else the whole match.
func secretGroup(rule *Rule, m []int) (int, int) {
	r := rule.rule
	if r.SecretGroup > 0 && 2*r.SecretGroup+1 < len(m) {
		return m[2*r.SecretGroup], m[2*r.SecretGroup+1]
	}
	for g := 1; 2*g+1 < len(m); g++ {
		if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
			return m[2*g], m[2*g+1]
		}
	}
	return m[0], m[1]
}

// allowed applies gitleaks' allowlists to a finding. An allowlist that
// names commits or paths cannot hold for text that is no file of a
// repository: with the AND condition it allows nothing. The global
// allowlist's stop words (placeholders of documentation, such as the
// alphabet) are not applied: what n8n sends is no documentation, and hiding
// a placeholder costs nothing.
func (s *Set) allowed(lists []*config.Allowlist, secret, match, line string, stopWords bool) bool {
	for _, a := range lists {
		if a.MatchCondition == config.AllowlistMatchAnd && (len(a.Commits) > 0 || len(a.Paths) > 0) {
			continue
		}
		target := secret
		switch a.RegexTarget {
		case "match":
			target = match
		case "line":
			target = line
		}
		if a.MatchCondition == config.AllowlistMatchAnd {
			stop, _ := a.ContainsStopWord(secret)
			stop = stop && stopWords
			if (len(a.Regexes) == 0 || a.RegexAllowed(target)) && (len(a.StopWords) == 0 || stop) &&
				(len(a.Regexes) > 0 || len(a.StopWords) > 0) {
				return true
			}
			continue
		}
		if a.RegexAllowed(target) {
			return true
		}
		if stop, _ := a.ContainsStopWord(secret); stop && stopWords {
			return true
		}
	}
	return false
}

func lineOf(text string, start, end int) string {
	from := strings.LastIndexByte(text[:start], '\n') + 1
	to := strings.IndexByte(text[end:], '\n')
	if to < 0 {
		return text[from:]
	}
	return text[from : end+to]
}

// entropy is the Shannon entropy of s in bits per byte, as gitleaks
// computes it.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n, bits := float64(len(s)), 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			bits -= p * math.Log2(p)
		}
	}
	return bits
}

// ASCIILower lowers ASCII letters only, so that every byte keeps its index
// (strings.ToLower turns an invalid byte into three bytes, and "İ" into
// three): offsets found in the lowered text are the text's.
func ASCIILower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Reference returns what the rules find in text as gitleaks runs them:
// every rule's expression over the whole text, whatever the keywords. It
// is slow, and the measure that Find is held to.
func (s *Set) Reference(text string) []Span {
	var spans []Span
	lower := strings.ToLower(text)
	for i := range s.rules {
		kws := s.rules[i].rule.Keywords
		if len(kws) > 0 && !slices.ContainsFunc(kws, func(k string) bool { return strings.Contains(lower, strings.ToLower(k)) }) {
			continue // gitleaks runs a rule only on text that holds one of its keywords
		}
		spans = s.run(spans, text, window{rule: i, start: 0, end: len(text)})
	}
	return spans
}
