// Package rules finds credentials in free text with gitleaks' rule set:
// about two hundred rules for the tokens of known services (Stripe, Slack,
// GitHub, AWS, Okta, …), each a regular expression with the keywords that
// must be near a match, a minimum entropy for the secret and allowlists for
// what only looks like one. The rules come from gitleaks' Go module, so a
// version bump in go.mod brings its maintainers' new rules. The engine is
// this package's: gitleaks' own detector scans whole files and costs tens of
// milliseconds per 16 KiB, far more than a request may spend.
package rules

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
)

// GitleaksVersion is the version of gitleaks' module whose rules Default
// runs, as go.mod pins it (a test keeps the two together). Stored text is
// redacted again when it changes.
const GitleaksVersion = "v8.30.1"

// Skipped are the gitleaks rules this package does not run, and why.
var Skipped = map[string]string{
	// A name like key, token or password followed by a value: the
	// redactor's own pass over names and separators finds these in linear
	// time, whatever the quoting and escaping (the rule's regular
	// expression costs several milliseconds per 16 KiB of text that holds
	// its keywords, and such text is most of what n8n sends).
	"generic-api-key": "names and values are found by the redactor's structural pass",
}

// Rule is one rule as this package runs it.
type Rule struct {
	ID          string
	Description string
	rule        config.Rule
	before      int // bytes before a keyword a match may start
	after       int // bytes after a keyword a match may end
	// anchored is the rule's expression from its leading literal on,
	// anchored there: run where one of leads stands, it tries one position
	// instead of every position of a window. A rule without leads is run
	// on windows around its keywords.
	anchored  *regexp.Regexp
	leads     []string
	wordStart bool // the match starts with \b before a word character
}

// Set is a compiled rule set. It is safe for concurrent use.
type Set struct {
	rules     []Rule
	trie      *ahocorasick.Trie
	keywords  []string // the trie's patterns, lower case: keywords and leads
	byKeyword [][]int  // per pattern, the rules it is a keyword of (windows)
	byLead    [][]int  // per pattern, the rules whose matches start with it
	always    []int    // rules without keywords: every text is scanned
	global    []*config.Allowlist
}

// Default returns gitleaks' default rule set, compiled on first use.
var Default = sync.OnceValue(func() *Set {
	s, err := Load(config.DefaultConfig, Skipped)
	if err != nil {
		panic(fmt.Sprintf("rules: gitleaks' default configuration: %v", err))
	}
	return s
})

// Load compiles a gitleaks configuration (TOML), less the rules in skip.
func Load(toml string, skip map[string]string) (*Set, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(toml)); err != nil {
		return nil, err
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return nil, err
	}
	cfg, err := vc.Translate()
	if err != nil {
		return nil, err
	}
	s := &Set{global: cfg.Allowlists}
	index := map[string]int{}
	pattern := func(k string) int {
		i, ok := index[k]
		if !ok {
			i = len(s.keywords)
			index[k] = i
			s.keywords = append(s.keywords, k)
			s.byKeyword = append(s.byKeyword, nil)
			s.byLead = append(s.byLead, nil)
		}
		return i
	}
	for _, id := range cfg.OrderedRules {
		r := cfg.Rules[id]
		if r.Regex == nil || r.SkipReport || skip[id] != "" {
			continue // a rule on file names only, or a part of another rule
		}
		re, err := syntax.Parse(r.Regex.String(), syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", id, err)
		}
		n := len(s.rules)
		// A match may hold its keyword anywhere: the window reaches as far
		// before it as after it.
		rule := Rule{ID: id, Description: r.Description, rule: r, before: reach(re), after: reach(re)}
		if err := rule.anchor(re); err != nil {
			return nil, fmt.Errorf("rule %s: %w", id, err)
		}
		s.rules = append(s.rules, rule)
		if rule.leads != nil {
			for _, lead := range rule.leads {
				i := pattern(lead)
				s.byLead[i] = appendUnique(s.byLead[i], n)
			}
			continue
		}
		if len(r.Keywords) == 0 {
			s.always = append(s.always, n)
		}
		for _, k := range r.Keywords {
			i := pattern(strings.ToLower(k))
			s.byKeyword[i] = appendUnique(s.byKeyword[i], n)
		}
	}
	s.trie = ahocorasick.NewTrieBuilder().AddStrings(s.keywords).Build()
	return s, nil
}

// Rules returns the rules the set runs, in gitleaks' order.
func (s *Set) Rules() []Rule { return slices.Clone(s.rules) }

// Config returns the rule as gitleaks defines it.
func (r Rule) Config() config.Rule { return r.rule }

// unbounded stands for the reach of an expression without a longest match
// (a JWT, a private key block): it is looked for in maxWindow bytes first,
// and further when a match reaches that far (see run).
const unbounded = 64 << 10

// reach returns the longest text re can match, capped at unbounded.
func reach(re *syntax.Regexp) int {
	n := maxLen(re)
	if n < 0 || n > unbounded {
		return unbounded
	}
	return n
}

// maxLen returns the most bytes re can match, or -1 without a bound.
func maxLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += utf8Len(r)
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		return utf8Len(re.Rune[len(re.Rune)-1]) // the ranges are sorted
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 4
	case syntax.OpCapture:
		return maxLen(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return -1
	case syntax.OpQuest:
		return maxLen(re.Sub[0])
	case syntax.OpRepeat:
		if re.Max < 0 {
			return -1
		}
		n := maxLen(re.Sub[0])
		if n < 0 {
			return -1
		}
		return n * re.Max
	case syntax.OpConcat:
		total := 0
		for _, sub := range re.Sub {
			n := maxLen(sub)
			if n < 0 {
				return -1
			}
			total += n
		}
		return total
	case syntax.OpAlternate:
		most := 0
		for _, sub := range re.Sub {
			n := maxLen(sub)
			if n < 0 {
				return -1
			}
			most = max(most, n)
		}
		return most
	}
	return 0 // empty-width assertions
}

func utf8Len(r rune) int {
	switch {
	case r < 0x80:
		return 1
	case r < 0x800:
		return 2
	case r < 0x10000:
		return 3
	}
	return 4
}
