package n8n

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/retryaudit/retryaudit/n8n/rules"
)

// Redact returns v (decoded JSON) with credentials replaced. It does not
// modify v. Structure decides first: every value under a key named like a
// credential; every header whose name is not on the allow-list of harmless
// headers, whether the headers are an object, a list of strings (Node's
// rawHeaders, "Name: value" lines) or one string of lines; the value of
// every n8n name/value parameter and of every ["name", "value"] pair whose
// name is secret-like; and keys themselves, which can hold a token. A string
// that holds JSON, escaped any number of times, is redacted as the document
// it is. Every remaining string then passes RedactText.
func Redact(v any) any {
	w := walker{left: math.MaxInt}
	return w.value(v, false)
}

// redactPayload is Redact for a payload that is kept up to limit bytes of
// JSON: it walks v in the order json.Marshal writes it and leaves out
// (null) every value after limit bytes of text were redacted, since they
// would be cut anyway. It reports whether it left any out.
func redactPayload(v any, limit int) (any, bool) {
	w := walker{left: limit}
	out := w.value(v, false)
	return out, w.dropped
}

// walker redacts a document within a budget of text.
type walker struct {
	left    int // bytes of text still to redact
	dropped bool
}

// value walks v; headers says that v is (inside) a header collection,
// where only allow-listed names keep their values.
func (w *walker) value(v any, headers bool) any {
	if w.left <= 0 {
		if v != nil {
			w.dropped = true
		}
		return nil
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		name, _ := t["name"].(string)
		for _, k := range slices.Sorted(maps.Keys(t)) {
			val := t[k]
			var nv any
			switch {
			case headers && k == "value" && name != "":
				// n8n's headerParameters: {"name": "Authorization", "value": "…"}
				nv = w.header(name, val)
			case headers && k != "name" && k != "parameters" && k != "value":
				nv = w.header(k, val)
			case SensitiveName(k) && !empty(val):
				nv = Redacted
			case k == "value" && SensitiveName(name) && !empty(val):
				// n8n's query and body parameters, same shape as headers
				nv = Redacted
			case headerKey(k):
				if s, ok := val.(string); ok {
					nv = w.headerText(s) // headers sent as one string of lines
					break
				}
				nv = w.value(val, true)
			default:
				nv = w.value(val, headers)
			}
			out[w.key(k, out)] = nv
		}
		return out
	case []any:
		if headers && allStrings(t) {
			return w.headerList(t)
		}
		if len(t) == 2 {
			// ["api_key", "…"]: a query or form parameter as a pair.
			if name, isName := t[0].(string); isName && SensitiveName(name) && !empty(t[1]) {
				return []any{w.text(name), Redacted}
			}
		}
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = w.value(val, headers)
		}
		return out
	case string:
		return w.text(t)
	}
	return v
}

// key redacts a key; a key that was a credential becomes Redacted (then
// Redacted 2, …, so that two such keys stay two).
func (w *walker) key(k string, taken map[string]any) string {
	if plainKey(k) {
		return k
	}
	nk := w.text(k)
	if nk == k {
		return k
	}
	for i := 2; ; i++ {
		if _, ok := taken[nk]; !ok {
			return nk
		}
		nk = strings.TrimSuffix(nk, " "+itoa(i-1)) + " " + itoa(i)
	}
}

// plainKey reports a key too short and plain to hold a credential: most
// keys, which then cost no pass of the redactor.
func plainKey(k string) bool {
	if len(k) >= 16 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !wordChar(k[i]) && k[i] != '-' && k[i] != '.' {
			return false
		}
	}
	return true
}

// text redacts a string: as the JSON document it holds, if it holds one,
// else as free text.
func (w *walker) text(s string) string {
	w.left -= len(s)
	if doc, ok := embeddedJSON(s); ok {
		out := w.value(doc, false)
		if b, ok := marshalCompact(out); ok {
			return b
		}
	}
	return RedactText(s)
}

// embeddedJSON decodes a string that is itself a JSON object, array or
// string (a JSON document escaped into a string, possibly again and again).
func embeddedJSON(s string) (any, bool) {
	t := strings.TrimSpace(s)
	if len(t) < 2 {
		return nil, false
	}
	switch {
	case t[0] == '{' && t[len(t)-1] == '}', t[0] == '[' && t[len(t)-1] == ']':
	case t[0] == '"' && t[len(t)-1] == '"' && strings.ContainsAny(t, "{["):
	default:
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil || dec.More() {
		return nil, false
	}
	if inner, ok := doc.(string); ok {
		if _, ok := embeddedJSON(inner); !ok {
			return nil, false // a quoted string that holds no document
		}
	}
	return doc, true
}

// marshalCompact writes a document as JSON, without escaping <, > and &.
func marshalCompact(v any) (string, bool) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// header keeps the value of an allow-listed header (still redacted: a
// Location or Referer may carry a token) and hides every other one.
func (w *walker) header(name string, v any) any {
	if empty(v) {
		return v
	}
	if harmlessHeaders[strings.ToLower(strings.TrimSpace(name))] {
		return w.value(v, false)
	}
	return Redacted
}

// headerText redacts headers sent as one string: "Name: value" lines, of
// which only allow-listed names keep their values. A string that is no such
// list is free text.
func (w *walker) headerText(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, `\r\n`, "\n"), "\n")
	for _, line := range lines {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !headerName.MatchString(name) {
			if strings.TrimSpace(line) != "" {
				return w.text(s)
			}
		}
	}
	for i, line := range lines {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		trimmed := strings.TrimLeft(value, " \t")
		lines[i] = name + ":" + value[:len(value)-len(trimmed)] + w.header(strings.TrimSpace(name), strings.TrimRight(trimmed, "\r")).(string)
	}
	return strings.Join(lines, "\n")
}

// headerList redacts headers listed as strings: "Name: value" lines, or
// names and values in turn, as Node's rawHeaders lists them
// (["X-Api-Key", "abc123", "Accept", "*/*"]) and as a pair of a fetch
// Headers' entries does. A value is kept only after an allow-listed name.
func (w *walker) headerList(list []any) []any {
	out := make([]any, len(list))
	lines := true
	for _, v := range list {
		// A "name" that the redactor would change is no header's name (a
		// token before a colon): the list is then read as pairs, where
		// every name is redacted as text.
		name, _, ok := strings.Cut(v.(string), ":")
		lines = lines && ok && headerName.MatchString(name) && RedactText(name) == name
	}
	for i, v := range list {
		s := v.(string)
		switch {
		case lines:
			name, value, _ := strings.Cut(s, ":")
			trimmed := strings.TrimLeft(value, " \t")
			out[i] = name + ":" + value[:len(value)-len(trimmed)] + w.header(name, trimmed).(string)
		case i%2 == 0:
			out[i] = w.text(s) // a name
		default:
			out[i] = w.header(list[i-1].(string), s)
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

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// RedactionVersion names the redaction rules of this package. Raise it when
// they grow: the store then passes what it kept before through the new rules
// once (audit.Store.RedactStored). Version 4 is the structural pass with
// gitleaks' rule set; the version of gitleaks' module is part of it.
// Version 5 reads past error class names ("NodeApiError: X-Auth-Token: …"),
// values on the next line, braced and multipart values, and URL-encoded
// text.
const RedactionVersion = "5+gitleaks-" + rules.GitleaksVersion

// Redactor is the audit.Redactor that applies this package's rules: the
// store passes every text from n8n that it keeps through it.
type Redactor struct{}

// RedactText applies the package's RedactText.
func (Redactor) RedactText(s string) string { return RedactText(s) }

// Redact applies the package's Redact.
func (Redactor) Redact(v any) any { return Redact(v) }

// Version returns RedactionVersion.
func (Redactor) Version() string { return RedactionVersion }
