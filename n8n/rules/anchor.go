package rules

import (
	"regexp"
	"regexp/syntax"
	"strings"
)

// anchor prepares the rule to be run where its matches start: when its
// expression starts (after \b, and after a lazy run of name characters
// such as gitleaks' [\w.-]{0,50}? before an identifier) with a literal or
// a choice of literals, only the places where one stands need trying, and
// at one position each. The lazy run can be left out: from the identifier
// on, the same text matches and the secret is the same.
func (r *Rule) anchor(re *syntax.Regexp) error {
	if re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
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
	// Every match starts with one of these literals (after \b): the rule is
	// tried anchored wherever one stands, whichever keywords gitleaks gave
	// it. A literal too short to be rare is no anchor.
	lits := leadLiterals(subs[i])
	if len(lits) == 0 {
		return nil
	}
	shortest := minLead
	if r.wordStart {
		shortest = 2 // \b leaves few places: "ey" of a JWT, not of "key"
	}
	for _, lit := range lits {
		if len(lit) < shortest {
			return nil
		}
	}
	r.leads = lits
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

// minLead is the shortest literal a rule is anchored on.
const minLead = 3

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
			if emptyWidth(sub) {
				continue
			}
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

func emptyWidth(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpWordBoundary, syntax.OpBeginLine, syntax.OpBeginText, syntax.OpEmptyMatch:
		return true
	}
	return false
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
