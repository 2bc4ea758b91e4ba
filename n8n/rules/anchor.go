package rules

import (
	"regexp"
	"regexp/syntax"
	"strings"
)

// anchor prepares the rule to be run at its keywords: when its expression
// starts (after \b, and after a lazy run of name characters such as
// gitleaks' [\w.-]{0,50}? before an identifier) with a literal or a choice
// of literals holding a keyword, a match holds that keyword at a known
// offset from its start, and only that position needs trying. The lazy run
// can be left out: from the identifier on, the same text matches and the
// secret is the same.
func (r *Rule) anchor(re *syntax.Regexp) error {
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	i := 0
	for ; i < len(subs); i++ {
		switch sub := subs[i]; {
		case sub.Op == syntax.OpWordBoundary:
			r.wordStart = true
			continue
		case sub.Op == syntax.OpRepeat && sub.Min == 0 && sub.Flags&syntax.NonGreedy != 0:
			continue
		}
		break
	}
	if i == len(subs) {
		return nil
	}
	lits := leadLiterals(subs[i])
	if len(lits) == 0 {
		return nil
	}
	// Every match starts with one of the literals: when each of them holds
	// a keyword, or ends with the start of one, every match holds a keyword
	// at a known offset from its start (gitleaks' keywords are parts of
	// what their rule matches).
	offsets := map[string][]int{}
	for _, lit := range lits {
		found := false
		for _, k := range r.rule.Keywords {
			k = strings.ToLower(k)
			for o := range len(lit) {
				if strings.HasPrefix(lit[o:], k) || strings.HasPrefix(k, lit[o:]) {
					offsets[k] = appendUnique(offsets[k], o)
					found = true
				}
			}
		}
		if !found {
			return nil // a match without a keyword at a known place: windows
		}
	}
	r.offsets = offsets
	rest := &syntax.Regexp{Op: syntax.OpConcat, Sub: subs[i:]}
	anchored, err := regexp.Compile(`^(?:` + rest.String() + `)`)
	r.anchored = anchored
	return err
}

// leadLiterals returns, lower case, the literals a match of re must start
// with, or nil when it does not start with a literal or a choice of them.
func leadLiterals(re *syntax.Regexp) []string {
	set, _ := literals(re)
	return set
}

// maxLiterals bounds the choices literals follows.
const maxLiterals = 64

// literals returns the strings re matches when it matches a finite set of
// literals (whole is true), else the literals its matches start with.
func literals(re *syntax.Regexp) (set []string, whole bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{strings.ToLower(string(re.Rune))}, true
	case syntax.OpCapture:
		return literals(re.Sub[0])
	case syntax.OpCharClass:
		// A small class ([ps], [Ss]) is a choice of one-letter literals.
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(set) == 8 {
					return nil, false
				}
				set = appendString(set, strings.ToLower(string(r)))
			}
		}
		return set, true
	case syntax.OpQuest:
		lits, w := literals(re.Sub[0])
		if lits == nil {
			return nil, false
		}
		return appendString(lits, ""), w
	case syntax.OpAlternate:
		whole = true
		for _, sub := range re.Sub {
			lits, w := literals(sub)
			if lits == nil {
				return nil, false
			}
			set, whole = append(set, lits...), whole && w
		}
		if len(set) > maxLiterals {
			return nil, false
		}
		return set, whole
	case syntax.OpConcat:
		set = []string{""}
		for _, sub := range re.Sub {
			lits, w := literals(sub)
			if lits == nil || len(set)*len(lits) > maxLiterals {
				return prefixes(set)
			}
			var next []string
			for _, a := range set {
				for _, b := range lits {
					next = append(next, a+b)
				}
			}
			set = next
			if !w {
				return set, false
			}
		}
		return set, true
	}
	return nil, false
}

// prefixes is what a concatenation that stopped being literal starts with.
func prefixes(set []string) ([]string, bool) {
	for _, s := range set {
		if s == "" {
			return nil, false
		}
	}
	return set, false
}

func appendString(list []string, s string) []string {
	for _, t := range list {
		if t == s {
			return list
		}
	}
	return append(list, s)
}

func appendUnique(list []int, n int) []int {
	for _, m := range list {
		if m == n {
			return list
		}
	}
	return append(list, n)
}
