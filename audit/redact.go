package audit

import (
	"net/url"
	"regexp"
	"strings"
)

// Redacted replaces every credential the service finds in what n8n sends.
const Redacted = "[redacted]"

// sensitiveName matches keys, header names and query parameters that carry
// credentials. It errs on the side of hiding: a hidden harmless value costs
// nothing, a stored token costs a rotation.
var sensitiveName = regexp.MustCompile(`(?i)(authorization|cookie|api[-_]?key|apikey|token|passw(or)?d|pwd|secret|` +
	`credential|signature|private[-_]?key|session|x-[a-z0-9-]*-key$)`)

var (
	// A scheme and its credentials inside any string: "Bearer abc", "Basic abc".
	authScheme = regexp.MustCompile(`(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{6,}`)
	// "password": "x" and password=x inside a string that holds JSON or a form.
	jsonSecret = regexp.MustCompile(`(?i)("[^"]*(?:token|passw(?:or)?d|secret|api[-_]?key|authorization)[^"]*"\s*:\s*)"(?:[^"\\]|\\.)*"`)
)

// Redact returns v (decoded JSON) with credentials replaced. It does not
// modify v.
func Redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		named, _ := t["name"].(string)
		for k, val := range t {
			switch {
			case sensitiveName.MatchString(k) && !empty(val):
				out[k] = Redacted
			case k == "value" && sensitiveName.MatchString(named) && !empty(val):
				// n8n's header, query and body parameters: {"name": "Authorization", "value": "…"}
				out[k] = Redacted
			default:
				out[k] = Redact(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = Redact(val)
		}
		return out
	case string:
		return redactString(t)
	}
	return v
}

// empty reports a value that can hold no credential: nothing, an empty
// string, or a flag such as sendCredentialsOnCrossOriginRedirect.
func empty(v any) bool {
	switch t := v.(type) {
	case nil, bool:
		return true
	case string:
		return t == ""
	}
	return false
}

func redactString(s string) string {
	s = authScheme.ReplaceAllString(s, "$1 "+Redacted)
	s = jsonSecret.ReplaceAllString(s, `$1"`+Redacted+`"`)
	if strings.Contains(s, "://") && strings.Contains(s, "?") {
		s = redactURL(s)
	}
	return s
}

// redactURL hides credentials in a URL's query and user info; a string
// that does not parse as a URL is returned as it is.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return s
	}
	changed := false
	if _, hasPassword := u.User.Password(); hasPassword {
		u.User = url.UserPassword(u.User.Username(), Redacted)
		changed = true
	}
	q := u.Query()
	for k := range q {
		if sensitiveName.MatchString(k) {
			q.Set(k, Redacted)
			changed = true
		}
	}
	if !changed {
		return s
	}
	u.RawQuery = q.Encode()
	return u.String()
}
