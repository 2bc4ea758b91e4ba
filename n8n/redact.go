package n8n

import (
	"regexp"
	"strings"
)

// Redacted replaces every credential the service finds in what n8n sends.
const Redacted = "[redacted]"

// Redact returns v (decoded JSON) with credentials replaced. It does not
// modify v. Structure decides first: every value under a key named like a
// credential, every header whose name is not on the allow-list of harmless
// headers (in an object, or listed as strings as in Node's rawHeaders), and
// the value of every n8n name/value parameter whose name is secret-like.
// Every remaining string then passes RedactText.
func Redact(v any) any { return redactValue(v, false) }

// redactValue walks v; headers says that v is (inside) a header collection,
// where only allow-listed names keep their values.
func redactValue(v any, headers bool) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		name, _ := t["name"].(string)
		for k, val := range t {
			switch {
			case headers && k == "value" && name != "":
				// n8n's headerParameters: {"name": "Authorization", "value": "…"}
				out[k] = redactHeader(name, val)
			case headers && k != "name" && k != "parameters" && k != "value":
				out[k] = redactHeader(k, val)
			case SensitiveName(k) && !empty(val):
				out[k] = Redacted
			case k == "value" && SensitiveName(name) && !empty(val):
				// n8n's query and body parameters, same shape as headers
				out[k] = Redacted
			default:
				out[k] = redactValue(val, headers || headerKey(k))
			}
		}
		return out
	case []any:
		if headers && allStrings(t) {
			return redactHeaderList(t)
		}
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = redactValue(val, headers)
		}
		return out
	case string:
		return RedactText(t)
	}
	return v
}

// redactHeader keeps the value of an allow-listed header (still passed
// through RedactText: a Location or Referer may carry a token) and hides
// every other one.
func redactHeader(name string, v any) any {
	if empty(v) {
		return v
	}
	if harmlessHeaders[strings.ToLower(strings.TrimSpace(name))] {
		return redactValue(v, false)
	}
	return Redacted
}

// redactHeaderList redacts headers listed as strings: "Name: value" lines,
// or names and values in turn, as Node's rawHeaders lists them
// (["X-Api-Key", "abc123", "Accept", "*/*"]) and as a pair of a fetch
// Headers' entries does. A value is kept only after an allow-listed name.
func redactHeaderList(list []any) []any {
	out := make([]any, len(list))
	lines := true
	for _, v := range list {
		// A "name" that the patterns would change is no header's name
		// (a token before a colon): the list is then read as pairs, where
		// every name passes RedactText.
		name, _, ok := strings.Cut(v.(string), ":")
		lines = lines && ok && headerName.MatchString(name) && RedactText(name) == name
	}
	for i, v := range list {
		s := v.(string)
		switch {
		case lines:
			name, value, _ := strings.Cut(s, ":")
			trimmed := strings.TrimLeft(value, " \t")
			out[i] = name + ":" + value[:len(value)-len(trimmed)] + redactHeader(name, trimmed).(string)
		case i%2 == 0:
			out[i] = redactValue(s, false) // a name
		default:
			out[i] = redactHeader(list[i-1].(string), s)
		}
	}
	return out
}

// headerName is a header's name as it is written in practice.
var headerName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

func allStrings(list []any) bool {
	for _, v := range list {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return len(list) > 0
}

// headerKey reports a key whose value is a collection of headers: the
// request's headers, a response's, n8n's headerParameters.
func headerKey(k string) bool {
	switch strings.ToLower(k) {
	case "headers", "header", "headerparameters", "rawheaders", "responseheaders", "requestheaders":
		return true
	}
	return false
}

// harmlessHeaders are the header names whose values are kept; every other
// header's value is hidden, since new credential headers appear all the time
// (Ocp-Apim-Subscription-Key, X-Shopify-Access-Token, …).
var harmlessHeaders = wordSet(`accept accept-charset accept-encoding accept-language accept-ranges age
		cache-control connection content-disposition content-encoding content-language content-length
		content-location content-range content-type date etag expect expires host if-match if-modified-since
		if-none-match if-range if-unmodified-since keep-alive last-modified location origin pragma range referer
		retry-after server te traceparent tracestate trailer transfer-encoding upgrade user-agent vary via warning
		x-request-id x-correlation-id x-forwarded-for x-forwarded-host x-forwarded-proto x-ratelimit-limit
		x-ratelimit-remaining x-ratelimit-reset x-content-type-options x-frame-options`)

func wordSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

// empty reports a value that can hold no credential: nothing, an empty
// string, or a flag such as sendCredentialsOnCrossOriginRedirect. A number
// is no flag: a PIN or a numeric password is one.
func empty(v any) bool {
	switch t := v.(type) {
	case nil, bool:
		return true
	case string:
		return t == ""
	}
	return false
}

// RedactionVersion names the redaction rules of this package. Raise it when
// they grow: the store then passes what it kept before through the new rules
// once (audit.Store.RedactStored).
const RedactionVersion = "3"

// Redactor is the audit.Redactor that applies this package's rules: the
// store passes every text from n8n that it keeps through it.
type Redactor struct{}

// RedactText applies the package's RedactText.
func (Redactor) RedactText(s string) string { return RedactText(s) }

// Redact applies the package's Redact.
func (Redactor) Redact(v any) any { return Redact(v) }

// Version returns RedactionVersion.
func (Redactor) Version() string { return RedactionVersion }
