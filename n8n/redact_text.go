package n8n

import (
	"encoding/base64"
	"math"
	"regexp"
	"strings"
	"unicode"
)

// SensitiveName reports a key, header, query or form parameter name that
// carries credentials: pass, password, secret, token, jwt, auth,
// authorization, api_key, *-key, cookie, session, signature and their kin,
// in any case and spelling (apiKey, X-API-Key, Ocp-Apim-Subscription-Key,
// client_secret). It errs on the side of hiding: a hidden harmless value
// costs nothing, a stored token costs a rotation. "authentication" (n8n's
// "none" or a credential type) and "author" are not secrets.
func SensitiveName(name string) bool {
	words := splitWords(name)
	if len(words) == 0 {
		return false
	}
	joined := strings.Join(words, "")
	for _, part := range []string{"passw", "secret", "token", "apikey", "cookie", "session", "credential",
		"signature", "privatekey", "authorization", "authorisation", "jwt", "bearer", "csrf", "xsrf"} {
		if strings.Contains(joined, part) {
			return true
		}
	}
	for _, w := range words {
		switch w {
		case "pass", "pwd", "auth", "key", "sig", "hmac", "otp", "sid", "dsn":
			return true
		}
	}
	return false
}

// splitWords cuts a name into lower-case words at punctuation and at case
// changes: "X-APIKey" → x, api, key; "clientSecret" → client, secret.
func splitWords(name string) []string {
	var words []string
	var cur []rune
	runes := []rune(name)
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for i, r := range runes {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && len(cur) > 0:
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

var (
	// user:password@ in any URL, with or without a query.
	urlUserinfo = regexp.MustCompile(`(?i)([a-z][a-z0-9+.\-]*://)([^\s/?#@:"'<>\\]*):([^\s/?#"'<>\\]*)@`)
	// Credentials whose shape gives them away, wherever they stand.
	knownTokens = []*regexp.Regexp{
		regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*`), // a JWT
		regexp.MustCompile(`\b[spr]k_(?:live|test)_[A-Za-z0-9]{8,}`),                    // Stripe
		regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`),                                   // OpenAI, Anthropic
		regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]{8,}`),                           // Slack
		regexp.MustCompile(`\bxapp-[A-Za-z0-9-]{8,}`),
		regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`), // GitHub
		regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`),
		regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{16,}`),                   // GitLab
		regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),                         // AWS
		regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`),                     // Google
		regexp.MustCompile(`\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`), // SendGrid
		regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z ]*PRIVATE KEY-----|$)`),
	}
	slackHook = regexp.MustCompile(`(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+`)
	// A cookie header's value runs to the end of the line: every pair in it
	// is a session.
	cookieLine = regexp.MustCompile(`(?i)\b((?:set-)?cookie)(\s*:\s*)([^\r\n"\\]+)`)
	// A name followed by : or =, as in JSON, forms, queries and headers
	// quoted in a message; the value is read by hand after it.
	keyThenSep = regexp.MustCompile(`(\\?["']?)([A-Za-z][A-Za-z0-9_.\-]{0,63})(\\?["']?)(\s*[:=]\s*)`)
	// Authorization schemes without a header name before them.
	bearer    = regexp.MustCompile(`(?i)\b(bearer)(\s*:?\s*)([^\s"'\\,;]+)`)
	basic     = regexp.MustCompile(`(?i)\b(basic)(\s*:?\s*)([A-Za-z0-9+/]{6,}={0,2})`)
	tokenWord = regexp.MustCompile(`(?i)\b(token)(\s+)([A-Za-z0-9._~+/=\-]{16,})`)
	// Long runs that may be a key; entropyToken decides.
	longRun = regexp.MustCompile(`[A-Za-z0-9_+\-]{24,}`)
)

// RedactText replaces the credentials it recognises in free text: bearer
// and basic credentials with or without a colon, user:password@ in URLs,
// query, form, header and JSON values under secret-like names, JWTs, and
// long high-entropy tokens (sk-…, xox…, ghp_…, and any mixed-case run of 24
// or more). It is best effort: a credential in prose that has none of these
// shapes stays. RedactText(RedactText(s)) == RedactText(s).
func RedactText(s string) string {
	if len(s) < 4 {
		return s
	}
	for range 4 { // to a fixed point: one rule's output may show another's input
		t := redactOnce(s)
		if t == s {
			break
		}
		s = t
	}
	return s
}

func redactOnce(s string) string {
	s = urlUserinfo.ReplaceAllString(s, "${1}${2}:"+Redacted+"@")
	for _, re := range knownTokens {
		s = re.ReplaceAllString(s, Redacted)
	}
	s = slackHook.ReplaceAllString(s, "${1}"+Redacted)
	s = cookieLine.ReplaceAllString(s, "${1}${2}"+Redacted)
	s = redactPairs(s)
	s = bearer.ReplaceAllString(s, "${1}${2}"+Redacted)
	s = basic.ReplaceAllStringFunc(s, func(m string) string {
		sub := basic.FindStringSubmatch(m)
		if !basicCredential(sub[3]) {
			return m
		}
		return sub[1] + sub[2] + Redacted
	})
	s = tokenWord.ReplaceAllString(s, "${1}${2}"+Redacted)
	return longRun.ReplaceAllStringFunc(s, func(m string) string {
		if entropyToken(m) {
			return Redacted
		}
		return m
	})
}

// redactPairs replaces the value after every secret-like name followed by
// : or =. A name that is not secret-like consumes nothing but itself, so
// "Error: password=x" still finds password.
func redactPairs(s string) string {
	matches := keyThenSep.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		if m[0] < last || !SensitiveName(s[m[4]:m[5]]) {
			continue
		}
		sep := strings.TrimSpace(s[m[8]:m[9]])
		start, end := valueSpan(s, m[1], sep)
		if start == end {
			continue
		}
		if core := s[start:end]; core == Redacted || core == "null" || core == "true" || core == "false" {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// valueSpan finds the credential after a name and its separator at i: a
// quoted string's content (plain or backslash-escaped quotes), else a run up
// to the next delimiter, after an optional scheme word (Bearer, Basic). A
// URL's "://" and a JSON object or array are no value.
func valueSpan(s string, i int, sep string) (int, int) {
	rest := s[i:]
	if sep == ":" && strings.HasPrefix(rest, "//") {
		return i, i
	}
	for _, scheme := range []string{"bearer ", "basic ", "digest ", "token "} {
		if len(rest) > len(scheme) && strings.EqualFold(rest[:len(scheme)], scheme) {
			i += len(scheme)
			rest = s[i:]
			break
		}
	}
	switch {
	case strings.HasPrefix(rest, `\"`):
		if j := strings.Index(rest[2:], `\"`); j >= 0 {
			return i + 2, i + 2 + j
		}
		return i + 2, len(s)
	case strings.HasPrefix(rest, `"`):
		j := 1
		for j < len(rest) && rest[j] != '"' {
			if rest[j] == '\\' {
				j++
			}
			j++
		}
		return i + 1, i + min(j, len(rest))
	case strings.HasPrefix(rest, `'`):
		if j := strings.IndexByte(rest[1:], '\''); j >= 0 {
			return i + 1, i + 1 + j
		}
		return i + 1, len(s)
	case strings.HasPrefix(rest, Redacted):
		return i, i + len(Redacted)
	case sep == ":" && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, "[")):
		return i, i
	}
	j := strings.IndexFunc(rest, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune("&,;\"'<>\\}])", r)
	})
	if j < 0 {
		j = len(rest)
	}
	return i, i + j
}

// basicCredential reports base64 that decodes to user:password.
func basicCredential(v string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			return strings.ContainsRune(string(b), ':')
		}
	}
	return false
}

// entropyToken reports a run that looks generated rather than written:
// upper and lower case and digits mixed, at over 3.5 bits per character.
// Identifiers (HttpRequestV3, sendCredentialsOnCrossOriginRedirect), UUIDs
// and lower-case hex digests do not qualify.
func entropyToken(s string) bool {
	var upper, lower, digit bool
	counts := map[rune]int{}
	for _, r := range s {
		counts[r]++
		switch {
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= '0' && r <= '9':
			digit = true
		}
	}
	if !upper || !lower || !digit {
		return false
	}
	n := float64(len(s))
	bits := 0.0
	for _, c := range counts {
		p := float64(c) / n
		bits -= p * math.Log2(p)
	}
	return bits > 3.5
}
