package main

import (
	"fmt"
	"math"
	"strings"
)

// minTokenLen and minTokenBits are what a configured token must have at
// least: 32 characters, and 128 bits if each character were drawn at
// random from the kinds it uses (32 hex digits, 39 decimal digits, 22
// base64 characters; the generated tokens hold 256).
const (
	minTokenLen  = 32
	minTokenBits = 128
)

// makeToken is how the messages say to make a token.
const makeToken = "make one with: openssl rand -hex 32"

// token reads a bearer token (NAME or NAME_FILE) and refuses one too short
// or visibly weak: it guards every /v1 call, and a guessable one is no
// guard. The generated tokens (unset variables) are not checked: they are
// 32 random bytes.
func (e *envReader) token(name string) string {
	v := e.secret(name)
	if v == "" {
		return v
	}
	if why := tokenWeakness(v); why != "" {
		from := ""
		if e.getenv(name+"_FILE") != "" {
			from = " (read from " + name + "_FILE)"
		}
		e.fail(name, "the token%s %s; %s", from, why, makeToken) // the value is a secret: never echoed
	}
	return v
}

// tokenWeakness says why a token is too weak to guard the API, or "" when
// it is not: shorter than minTokenLen, a repeated pattern (one character, or
// a few again and again), few different characters, mostly a run of
// neighbouring characters (abcd…, 1234…), or fewer than minTokenBits for the
// kinds of characters it uses (all digits need 39).
func tokenWeakness(v string) string {
	if n := len(v); n < minTokenLen {
		return fmt.Sprintf("is %d characters long: at least %d are needed", n, minTokenLen)
	}
	if p := period(v); p <= len(v)/2 {
		return fmt.Sprintf("repeats a pattern of %d characters", p)
	}
	distinct := map[byte]bool{}
	for i := 0; i < len(v); i++ {
		distinct[v[i]] = true
	}
	if len(distinct) < 8 {
		return fmt.Sprintf("uses only %d different characters", len(distinct))
	}
	steps := 0
	for i := 1; i < len(v); i++ {
		if d := int(v[i]) - int(v[i-1]); d >= -1 && d <= 1 {
			steps++
		}
	}
	if steps*2 >= len(v)-1 {
		return "is mostly a run of neighbouring characters (abcd…, 1234…, aaaa…)"
	}
	if bits := float64(len(v)) * math.Log2(float64(alphabet(v))); bits < minTokenBits {
		return fmt.Sprintf("holds at most %.0f bits (%d characters of %d kinds): at least %d are needed "+
			"(32 hex digits, or 39 decimal digits)", bits, len(v), alphabet(v), minTokenBits)
	}
	return ""
}

// period is the length of the shortest pattern v repeats (len(v) when it
// repeats none).
func period(v string) int {
	for p := 1; p <= len(v)/2; p++ {
		if strings.HasPrefix(v[p:], v[:len(v)-p]) {
			return p
		}
	}
	return len(v)
}

// alphabet is the size of the character set v draws from, by the kinds it
// uses: decimal digits 10; letters 26 for each case used, or 6 for each
// when every letter is a hex digit's; anything else 33.
func alphabet(v string) int {
	var digit, lower, upper, beyondHex, other bool
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z':
			lower, beyondHex = true, beyondHex || c > 'f'
		case c >= 'A' && c <= 'Z':
			upper, beyondHex = true, beyondHex || c > 'F'
		default:
			other = true
		}
	}
	letters := 6
	if beyondHex {
		letters = 26
	}
	n := 0
	for _, used := range []struct {
		yes  bool
		size int
	}{{digit, 10}, {lower, letters}, {upper, letters}, {other, 33}} {
		if used.yes {
			n += used.size
		}
	}
	return max(n, 1)
}
