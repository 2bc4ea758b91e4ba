package people

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// LookupConfig is one source's CRM lookup, as RETRYAUDIT_CRM_LOOKUP_<SOURCE>_*
// configures it.
type LookupConfig struct {
	Source string
	// URL is the request's template: {source}, {event_id}, {item},
	// {crm_ref} and {idempotency_key}, each escaped for where it stands,
	// in the path or the query only (never the host).
	URL    string
	Method string // GET (the default) or POST
	// Body is POST's JSON template: the placeholders stand inside JSON
	// strings and are escaped as such.
	Body    string
	Headers map[string]string
	// Token is the secret, sent as "Authorization: Bearer <token>", or
	// raw in TokenHeader when set.
	Token       string
	TokenHeader string
	// Found is the JSON path that must be non-empty for "found" (default:
	// Ref); Ref the JSON path of the order's reference. A path is
	// dot-separated keys and array indexes: data.0.reference.
	Found, Ref string
	// NotFoundStatus is the HTTP status (404 or 410) this CRM answers for
	// a missing order; 0 (the default): every status other than 2xx is an
	// error, for a wrong URL answers 404 too.
	NotFoundStatus int
	Timeout        time.Duration // default 5s, at most 10s (inside the API's timeout)
	MaxBody        int64         // the answer's cap (default 256 KiB): past it, cut and said so
}

// DefaultLookupTimeout and DefaultLookupMaxBody bound a lookup when its
// configuration does not.
const (
	DefaultLookupTimeout = 5 * time.Second
	MaxLookupTimeout     = 10 * time.Second
	DefaultLookupMaxBody = 256 << 10
)

var placeholder = regexp.MustCompile(`\{[a-z_]+\}`)

// Check validates a configuration and fills its defaults; each problem is
// named by the field's suffix (URL, METHOD, ...), for the caller to name
// its variable.
func (c *LookupConfig) Check() (field string, err error) {
	for _, p := range placeholder.FindAllString(c.URL+c.Body, -1) {
		switch p {
		case "{source}", "{event_id}", "{item}", "{crm_ref}", "{idempotency_key}":
		default:
			return "URL", fmt.Errorf("unknown placeholder %s (use {source}, {event_id}, {item}, {crm_ref}, {idempotency_key})", p)
		}
	}
	u, err := url.Parse(placeholder.ReplaceAllString(c.URL, "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "URL", fmt.Errorf("%q is not an http(s) URL", c.URL)
	}
	if u.User != nil {
		return "URL", fmt.Errorf("%q carries credentials: put the secret in _TOKEN_FILE", u.Redacted())
	}
	_, host, _ := strings.Cut(c.URL, "://")
	if end := strings.IndexAny(host, "/?#"); end >= 0 {
		host = host[:end]
	}
	if strings.Contains(host, "{") {
		return "URL", fmt.Errorf("%q: placeholders may stand in the path and the query only, not in the host", c.URL)
	}
	switch c.Method = strings.ToUpper(strings.TrimSpace(c.Method)); c.Method {
	case "":
		c.Method = http.MethodGet
	case http.MethodGet, http.MethodPost:
	default:
		return "METHOD", fmt.Errorf("must be GET or POST, not %q", c.Method)
	}
	if c.Body != "" && c.Method != http.MethodPost {
		return "BODY", fmt.Errorf("a body needs METHOD=POST")
	}
	for name := range c.Headers {
		if !validHeaderName(name) {
			return "HEADERS", fmt.Errorf("%q is not a header name", name)
		}
	}
	if c.TokenHeader != "" && !validHeaderName(c.TokenHeader) {
		return "TOKEN_HEADER", fmt.Errorf("%q is not a header name", c.TokenHeader)
	}
	if strings.ContainsAny(c.Token, "\r\n") {
		return "TOKEN", fmt.Errorf("the token holds a line break")
	}
	if c.Ref == "" {
		return "REF", fmt.Errorf("required: the JSON path of the order's reference in the CRM's answer (e.g. data.0.id)")
	}
	for f, p := range map[string]string{"REF": c.Ref, "FOUND": c.Found} {
		if p != "" && !validPath(p) {
			return f, fmt.Errorf("%q is not a JSON path (keys and indexes separated by dots: data.0.id)", p)
		}
	}
	if c.Found == "" {
		c.Found = c.Ref
	}
	switch c.NotFoundStatus {
	case 0, http.StatusNotFound, http.StatusGone:
	default:
		return "NOT_FOUND_STATUS", fmt.Errorf("must be 404 or 410, not %d", c.NotFoundStatus)
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultLookupTimeout
	case c.Timeout < 0 || c.Timeout > MaxLookupTimeout:
		return "TIMEOUT", fmt.Errorf("%s is not between 0 and %s", c.Timeout, MaxLookupTimeout)
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultLookupMaxBody
	}
	return "", nil
}

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func validHeaderName(s string) bool { return headerName.MatchString(s) }

func validPath(p string) bool {
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			return false
		}
	}
	return true
}

// ParseHeaders reads "Name: value" pairs separated by ';'.
func ParseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for _, pair := range strings.Split(s, ";") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not Name: value", strings.TrimSpace(pair))
		}
		if strings.ContainsAny(value, "\r\n") {
			return nil, fmt.Errorf("the value of %s holds a line break", name)
		}
		h[name] = value
	}
	return h, nil
}

// SourceKey is a source's part of its variables' names: upper case, every
// character other than a letter or a digit an underscore (shop-eu: SHOP_EU).
func SourceKey(source string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, source)
}
