package n8n

import (
	"encoding/base64"
	"math"
	"strings"

	"github.com/retryaudit/retryaudit/n8n/rules"
)

// span is a part of a text to hide: bytes [start, end).
type span struct{ start, end int }

// structuralSpans finds, in one linear pass each, the credentials that
// free text gives away by its structure rather than by a token's shape:
// values after credential-like names (name=value, name: value, "name":
// "value" escaped any number of times, :name => "value", "name", "value"),
// the password of a URL's or a DSN's userinfo with or without a scheme
// (//crm:pw@proxy, app:pw@tcp(db)), curl's -u user:password, credentials
// after an authorization scheme (Bearer, Basic, Token), private key blocks,
// Slack webhook paths, long generated-looking runs, values on the line after
// their name (YAML, folded headers, multipart fields), and all of these in
// URL-encoded text.
func structuralSpans(s string) []span {
	return structural(s, percentDepth)
}

// percentDepth is how many times URL-encoded text is decoded, at most, in
// search of credentials: a JSON document in a form field is encoded once,
// a form in a redirect's query twice.
const percentDepth = 3

func structural(s string, depth int) []span {
	var spans []span
	spans = pairSpans(s, spans)
	spans = multipartSpans(s, spans)
	spans = userinfoSpans(s, spans)
	spans = curlUserSpans(s, spans)
	spans = schemeSpans(s, spans)
	spans = privateKeySpans(s, spans)
	spans = slackHookSpans(s, spans)
	spans = jwtSpans(s, spans)
	spans = entropySpans(s, spans)
	return percentSpans(s, spans, depth)
}

// jwtSpans hides JSON Web Tokens, signed or not, whatever their length:
// two or three base64url segments of which the first two are JSON objects
// (they start with eyJ, the encoding of {"). Their claims name people and
// accounts even when the signature was cut off.
func jwtSpans(s string, spans []span) []span {
	for i := 0; ; {
		j := strings.Index(s[i:], "eyJ")
		if j < 0 {
			return spans
		}
		at := i + j
		i = at + 3
		if at > 0 && runByte(s[at-1]) {
			continue
		}
		end, dots := at, 0
		for end < len(s) && (runByte(s[end]) || s[end] == '.' && dots < 2) {
			if s[end] == '.' {
				dots++
			}
			end++
		}
		if dots >= 1 && strings.HasPrefix(s[at+strings.IndexByte(s[at:end], '.')+1:], "eyJ") {
			spans = append(spans, span{at, end})
			i = end
		}
	}
}

func nameStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func nameByte(c byte) bool {
	return nameStart(c) || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func wordChar(c byte) bool {
	return nameStart(c) || c >= '0' && c <= '9' || c == '_'
}

func quoteByte(c byte) bool { return c == '"' || c == '\'' || c == '\\' || c == '`' }

// pairSpans hides the value after every credential-like name followed by a
// separator. A name that is not credential-like consumes nothing but
// itself, so "Error: password=x" still finds password.
func pairSpans(s string, spans []span) []span {
	for i := 0; i < len(s); {
		if !nameStart(s[i]) || i > 0 && wordChar(s[i-1]) {
			i++
			continue
		}
		j := i
		for j < len(s) && nameByte(s[j]) {
			j++
		}
		quoted := i > 0 && quoteByte(s[i-1])
		if j-i > 64 {
			i = j
			continue
		}
		name := s[i:j]
		if errorClass(name) {
			// "NodeApiError: X-Auth-Token: …": the class of what was
			// thrown names no credential, and must not take the header's
			// name as its value and so shield the header's.
			i = j
			continue
		}
		sensitive := SensitiveName(name)
		if !sensitive && !weakName(name) {
			i = j
			continue
		}
		k := j
		for k < len(s) && (quoteByte(s[k]) || s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n') {
			k++
		}
		k, weak, ok := separator(s, k, quoted)
		if !ok {
			i = j
			continue
		}
		start, end := pairValue(s, k, name, i)
		if start < end && nextName(s[start:end]) {
			// "token: X-Auth-Token: …": what follows is another name
			// and its value, read as such.
			i = start
			continue
		}
		if start < end && (sensitive && !weak || tokenLike(s[start:end])) {
			spans = append(spans, span{start, end})
			i = end
			continue
		}
		i = j
	}
	return spans
}

// errorClass reports the name of an error class, as a stack or a message
// starts with it: NodeApiError, CredentialAccessError, n8n.WorkflowOperationError,
// TypeError. Its words (api, credential, authorization) name no credential.
func errorClass(name string) bool {
	if dot := strings.LastIndexByte(name, '.'); dot >= 0 {
		name = name[dot+1:]
	}
	if name == "" || name[0] < 'A' || name[0] > 'Z' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !nameStart(name[i]) && (name[i] < '0' || name[i] > '9') {
			return false
		}
	}
	return strings.HasSuffix(name, "Error") || strings.HasSuffix(name, "Exception")
}

// nextName reports a value that is rather the next name and its colon: a
// credential's name or a header's ("X-Auth-Token:", "Accept:").
func nextName(v string) bool {
	n, ok := strings.CutSuffix(v, ":")
	if !ok || !headerName.MatchString(n) {
		return false
	}
	return SensitiveName(n) || weakName(n) || harmlessHeaders[strings.ToLower(n)]
}

// weakName reports a name that holds credentials only sometimes (api,
// access): a value after it is hidden when it looks generated.
func weakName(name string) bool {
	for _, w := range splitWords(name) {
		if w == "api" || w == "access" {
			return true
		}
	}
	return false
}

// separator reads the separator at k: = : => := ?= (and a comma after a
// quoted name, as in ["api_key", "…"]). It returns where the value may
// start. A weak separator (a comma after a bare name, ||, >) is one that
// prose uses too ("wrong password, try again"): the value after it must
// look generated.
func separator(s string, k int, quoted bool) (at int, weak, ok bool) {
	if k >= len(s) {
		return k, false, false
	}
	switch {
	case strings.HasPrefix(s[k:], "=>"), strings.HasPrefix(s[k:], ":="), strings.HasPrefix(s[k:], "?="):
		return k + 2, false, true
	case strings.HasPrefix(s[k:], "||"):
		return k + 2, true, true
	case s[k] == ':':
		if strings.HasPrefix(s[k:], "://") {
			return k, false, false // a URL's scheme
		}
		return k + 1, false, true
	case s[k] == '=':
		return k + 1, false, true
	case s[k] == ',':
		return k + 1, !quoted, true
	case s[k] == '>':
		return k + 1, true, true
	}
	return k, false, false
}

// tokenLike reports a value that looks generated: ten or more characters
// without a space, holding a digit or of high entropy.
func tokenLike(v string) bool {
	if len(v) < 10 || strings.ContainsAny(v, " \t") {
		return false
	}
	return strings.ContainsAny(v, "0123456789") || entropyBits(v) > 3.5
}

// pairValue finds the value after a separator: the content of a quoted
// string however deeply its quotes are escaped, else a run up to the next
// delimiter (the end of the line for headers such as Authorization and
// Cookie). An authorization scheme word (Bearer, ApiKey, GenieKey) stays
// readable before it. A JSON object or array, null, a boolean and what was
// already hidden are no value.
func pairValue(s string, k int, name string, nameAt int) (int, int) {
	for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
		k++
	}
	if start, end, ok := nextLineValue(s, k, nameAt); ok {
		return checkedValue(s, k, name, start, end)
	}
	q := k
	for q < len(s) && s[q] == '\\' {
		q++
	}
	var start, end int
	switch {
	case q < len(s) && (s[q] == '"' || s[q] == '\'' || s[q] == '`'):
		start, end = quotedValue(s, q)
	case q > k:
		return k, k // a backslash that escapes no quote: no value here
	case k < len(s) && s[k] == '{':
		// ODBC's PWD={p;w}: braces around a value that may hold the
		// delimiters; a JSON object is no value.
		start, end = bracedValue(s, k)
		if start == end {
			return k, k
		}
	default:
		start, end = k, k
		stops := "&,;\"'<>\\}])` \t\r\n"
		if headerLike(name) {
			stops = "\"'\\`\r\n"
		}
		for end < len(s) && !strings.ContainsRune(stops, rune(s[end])) {
			end++
		}
	}
	return checkedValue(s, k, name, start, end)
}

// quotedValue is the content of the string whose (possibly escaped) opening
// quote is at q.
func quotedValue(s string, q int) (int, int) {
	quote := s[q]
	start := q + 1
	end := start
	for end < len(s) && s[end] != quote {
		end++
	}
	for end > start && s[end-1] == '\\' {
		end-- // the closing quote's escapes
	}
	return start, end
}

// checkedValue returns the value s[start:end] found after the separator at
// k, or (k, k) when it is none: empty, null, a boolean, what was hidden
// already, a JSON object or array. The scheme word of an authorization
// stays readable before its credential.
func checkedValue(s string, k int, name string, start, end int) (int, int) {
	core := s[start:end]
	switch {
	case core == "", core == "null", core == "true", core == "false", strings.HasPrefix(core, Redacted),
		strings.HasPrefix(core, "{"), strings.HasPrefix(core, "["):
		return k, k
	}
	// Keep the scheme word of "Authorization: GenieKey 4f…": the word says
	// what kind of credential it was.
	if sp := strings.IndexByte(core, ' '); strings.Contains(strings.ToLower(name), "auth") && sp > 0 && sp <= 20 && isWord(core[:sp]) && sp+1 < len(core) {
		start += sp + 1
		if strings.HasPrefix(s[start:end], Redacted) {
			return k, k
		}
	}
	return start, end
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !nameStart(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// userinfoSpans hides the password of every user:password@host, in a URL
// (https://u:p@h, //crm:pw@proxy) or a DSN without a scheme
// (app:pw@tcp(db:3306)/shop). The password may itself hold '@'.
func userinfoSpans(s string, spans []span) []span {
	for at := strings.IndexByte(s, '@'); at >= 0; {
		if at+1 < len(s) && hostStart(s[at+1]) {
			q := at
			for q > 0 && userinfoByte(s[q-1]) {
				q--
			}
			if q == 0 || !nameByte(s[q-1]) {
				if c := strings.IndexByte(s[q:at], ':'); c >= 0 && q+c+1 < at {
					pw := s[q+c+1 : at]
					if !strings.HasPrefix(pw, Redacted) && !strings.HasPrefix(pw, "//") {
						spans = append(spans, span{q + c + 1, at})
					}
				}
			}
		}
		next := strings.IndexByte(s[at+1:], '@')
		if next < 0 {
			break
		}
		at += 1 + next
	}
	return spans
}

func userinfoByte(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune(`/"'<>\{}[]()|^`+"`", rune(c))
}

func hostStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '['
}

// curlUserSpans hides the password of curl's -u user:password (and
// --user, --proxy-user), quoted or not.
func curlUserSpans(s string, spans []span) []span {
	for _, flag := range []string{"-u", "--user", "--proxy-user", "-U"} {
		for i := 0; ; {
			j := strings.Index(s[i:], flag)
			if j < 0 {
				break
			}
			at := i + j
			i = at + len(flag)
			if at > 0 && s[at-1] != ' ' && s[at-1] != '\t' && s[at-1] != '"' && s[at-1] != '\'' {
				continue
			}
			k := i
			if k < len(s) && s[k] == '=' {
				k++
			}
			for k < len(s) && (s[k] == ' ' || s[k] == '\t' || quoteByte(s[k])) {
				k++
			}
			if k == i {
				continue // "-uX": another flag
			}
			end := k
			for end < len(s) && s[end] > ' ' && !quoteByte(s[end]) {
				end++
			}
			if c := strings.IndexByte(s[k:end], ':'); c >= 0 && k+c+1 < end && !strings.HasPrefix(s[k+c+1:end], Redacted) {
				spans = append(spans, span{k + c + 1, end})
			}
		}
	}
	return spans
}

// schemeSpans hides what follows an authorization scheme word without a
// header name before it: "Bearer abc", "Bearer: abc", "(Basic dXNlcjpwYXNz)",
// "token ghp…". Basic is taken when its base64 decodes to user:password,
// token when 16 or more token characters follow, so that "the basic plan;
// token expired" stays.
func schemeSpans(s string, spans []span) []span {
	lower := rules.ASCIILower(s) // byte for byte: its indexes are s's
	for _, scheme := range []string{"bearer", "basic", "token"} {
		for i := 0; ; {
			j := strings.Index(lower[i:], scheme)
			if j < 0 {
				break
			}
			at := i + j
			i = at + len(scheme)
			if at > 0 && nameByte(s[at-1]) || i < len(s) && nameByte(s[i]) {
				continue
			}
			k := i
			for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			if k < len(s) && s[k] == ':' {
				k++
				for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
					k++
				}
			}
			if k == i {
				continue
			}
			end := k
			for end < len(s) && !strings.ContainsRune(" \t\r\n\"'\\,;)", rune(s[end])) {
				end++
			}
			cred := s[k:end]
			if cred == "" || strings.HasPrefix(cred, Redacted) {
				continue
			}
			switch scheme {
			case "basic":
				if !basicCredential(strings.TrimRight(cred, ".")) {
					continue
				}
			case "token":
				if len(cred) < 16 || !tokenChars(cred) {
					continue
				}
			}
			spans = append(spans, span{k, end})
		}
	}
	return spans
}

func tokenChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(nameByte(c) || c == '~' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// basicCredential reports base64 that decodes to user:password.
func basicCredential(v string) bool {
	if len(v) < 6 {
		return false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			return strings.ContainsRune(string(b), ':')
		}
	}
	return false
}

// privateKeySpans hides PEM private key blocks, to their end line or, cut
// short, to the end of the text.
func privateKeySpans(s string, spans []span) []span {
	for i := 0; ; {
		j := strings.Index(s[i:], "-----BEGIN ")
		if j < 0 {
			return spans
		}
		at := i + j
		head := strings.Index(s[at+11:], "-----")
		if head < 0 {
			return spans
		}
		label := s[at+11 : at+11+head]
		i = at + 11 + head + 5
		if !strings.Contains(label, "PRIVATE KEY") || len(label) > 40 { // PGP's ends in BLOCK
			continue
		}
		end := len(s)
		if e := strings.Index(s[i:], "-----END "); e >= 0 {
			end = i + e
		}
		if end > i {
			spans = append(spans, span{i, end})
		}
		i = end
	}
}

// slackHookSpans hides the secret path of Slack's incoming webhooks.
func slackHookSpans(s string, spans []span) []span {
	for i := 0; ; {
		j := strings.Index(s[i:], "hooks.slack.com/")
		if j < 0 {
			return spans
		}
		at := i + j + len("hooks.slack.com/")
		i = at
		for _, kind := range []string{"services/", "workflows/", "triggers/"} {
			if strings.HasPrefix(s[at:], kind) {
				start, end := at+len(kind), at+len(kind)
				for end < len(s) && (nameByte(s[end]) || s[end] == '/') {
					end++
				}
				if end > start && !strings.HasPrefix(s[start:], Redacted) {
					spans = append(spans, span{start, end})
				}
				i = end
			}
		}
	}
}

// entropySpans hides runs of 24 or more token characters that look
// generated rather than written: upper and lower case and digits mixed, at
// over 3.5 bits per character. Identifiers (HttpRequestV3,
// sendCredentialsOnCrossOriginRedirect), UUIDs and lower-case hex digests
// do not qualify.
func entropySpans(s string, spans []span) []span {
	for i := 0; i < len(s); {
		if !runByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && runByte(s[j]) {
			j++
		}
		if j-i >= 24 && entropyToken(s[i:j]) {
			spans = append(spans, span{i, j})
		}
		i = j
	}
	return spans
}

func runByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '+' || c == '-'
}

func entropyToken(s string) bool {
	var upper, lower, digit bool
	var counts [256]int
	for i := 0; i < len(s); i++ {
		c := s[i]
		counts[c]++
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9':
			digit = true
		}
	}
	if !upper || !lower || !digit {
		return false
	}
	return entropyBits(s) > 3.5
}

// entropyBits is the Shannon entropy of s in bits per byte.
func entropyBits(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	bits := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			bits -= p * math.Log2(p)
		}
	}
	return bits
}
