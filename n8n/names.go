package n8n

import (
	"strings"
	"unicode"
)

// SensitiveName reports a key, header, query or form parameter name that
// carries credentials: pass, password, passphrase, secret, token, jwt, auth,
// authorization, api_key, appkey, *-key, cookie, session, signature, creds
// and their kin, in any case and spelling (apiKey, X-API-Key,
// Ocp-Apim-Subscription-Key, client_secret, PASS_PHRASE). It errs on the
// side of hiding: a hidden harmless value costs nothing, a stored token
// costs a rotation. "authentication" (n8n's "none" or a credential type),
// "author", "keyword" and "monkey" are not secrets.
func SensitiveName(name string) bool {
	if len(name) == 0 || len(name) > 128 || !mayBeSensitive(name) {
		return false
	}
	words := splitWords(name)
	joined := strings.Join(words, "")
	for _, part := range []string{"passw", "passphrase", "passcode", "secret", "token", "apikey", "cookie", "session",
		"credential", "signature", "privatekey", "authorization", "authorisation", "jwt", "bearer", "csrf", "xsrf"} {
		if strings.Contains(joined, part) {
			return true
		}
	}
	for _, w := range words {
		switch w {
		case "pass", "pwd", "auth", "key", "sig", "hmac", "otp", "sid", "dsn", "creds", "passkey":
			return true
		}
		// appkey, secretkey, licensekey: a word that ends in "key" names
		// one, save for a few that are no key.
		if len(w) > 3 && strings.HasSuffix(w, "key") && !notKeys[w] {
			return true
		}
	}
	return false
}

// notKeys end in "key" and name none.
var notKeys = wordSet(`monkey donkey turkey hockey jockey whiskey lackey`)

// mayBeSensitive is a cheap first look: does the name, lower-cased, hold
// anything SensitiveName looks for at all?
func mayBeSensitive(name string) bool {
	var buf [128]byte
	b := buf[:0]
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	lower := string(b)
	for _, hint := range []string{"pas", "secret", "token", "key", "cookie", "session", "credential", "creds",
		"sig", "auth", "jwt", "bearer", "csrf", "xsrf", "pwd", "hmac", "otp", "sid", "dsn"} {
		if strings.Contains(lower, hint) {
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

// headerLike reports a name whose value runs to the end of its line, as an
// HTTP header's does: authorization, cookie.
func headerLike(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization", "cookie", "set-cookie", "www-authenticate", "proxy-authenticate":
		return true
	}
	return false
}
