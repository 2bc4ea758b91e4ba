package people

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/n8n"
)

// Result is a CRM lookup's answer, as it was recorded.
type Result struct {
	Source  string    `json:"source"`
	EventID string    `json:"event_id"`
	Item    string    `json:"item,omitempty"`
	Outcome string    `json:"result"` // audit.LookupFound, LookupNotFound or LookupError
	CRMRef  string    `json:"crm_ref,omitempty"`
	Link    string    `json:"crm_url,omitempty"` // the order's page (RETRYAUDIT_CRM_LINKS), when found
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Via     string    `json:"via"`
	// Version is the entry's version the lookup saw: a resolution prefilled
	// from it is fenced by the entry's version the person's page shows.
	Version int64 `json:"version"`
}

// Found reports whether the CRM has the order.
func (r Result) Found() bool { return r.Outcome == audit.LookupFound }

// Lookups runs the configured CRM lookups and records them.
type Lookups struct {
	store   *store.Store
	links   audit.Links
	red     audit.Redactor
	sources map[string]LookupConfig
	slots   map[string]chan struct{} // by source: its CRM host's lookups at once
	metrics *metrics.Metrics
	client  *http.Client
	now     func() time.Time
}

// MaxLookupsAtOnce is how many lookups one CRM host gets at once, whatever
// asks (a page, Slack, a script looping over events on the API): the next
// waits for one to end, within its timeout, and is not sent when none does.
const MaxLookupsAtOnce = 4

// NewLookups checks every source's configuration (the error names the
// source and the field) and prepares the HTTP client; m (nil for none)
// counts the lookups.
func NewLookups(st *store.Store, links audit.Links, red audit.Redactor, m *metrics.Metrics, configs []LookupConfig) (*Lookups, error) {
	l := &Lookups{store: st, links: links, red: red, sources: map[string]LookupConfig{}, slots: map[string]chan struct{}{},
		metrics: m, now: time.Now,
		client: &http.Client{CheckRedirect: n8n.CheckRedirect, Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: MaxLookupTimeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       time.Minute,
		}}}
	hosts := map[string]chan struct{}{}
	for _, c := range configs {
		if field, err := c.Check(); err != nil {
			return nil, fmt.Errorf("people: CRM lookup of %s: %s: %w", c.Source, field, err)
		}
		l.sources[c.Source] = c
		host := crmHost(c.URL)
		if hosts[host] == nil {
			hosts[host] = make(chan struct{}, MaxLookupsAtOnce)
		}
		l.slots[c.Source] = hosts[host]
	}
	return l, nil
}

// Configured reports whether a source has a CRM lookup.
func (l *Lookups) Configured(source string) bool {
	if l == nil {
		return false
	}
	_, ok := l.sources[source]
	return ok
}

// Run looks an event's order up in its source's CRM for a person and
// records the answer in the event's history (found with its reference,
// not found, or the error), with who asked and via what. A CRM that fails
// is an answer (Outcome error), not an error; the error is for an event
// that does not exist, a source without a lookup, or the database.
func (l *Lookups) Run(ctx context.Context, key audit.EventKey, who Who) (Result, error) {
	return l.RunItem(ctx, key, "", who)
}

// RunItem is Run for one item of an event.
func (l *Lookups) RunItem(ctx context.Context, key audit.EventKey, item string, who Who) (Result, error) {
	if !l.Configured(key.Source) {
		return Result{}, audit.FieldErrors{"source": fmt.Sprintf("no CRM lookup is configured for %q "+
			"(RETRYAUDIT_CRM_LOOKUP)", key.Source)}.Err()
	}
	cfg := l.sources[key.Source]
	d, err := l.store.EventPage(ctx, key.Source, key.EventID, audit.HistoryPage{Limit: 1})
	if err != nil {
		return Result{}, err
	}
	crmRef, version := d.CRMRef, d.Version
	if item != "" {
		found := false
		for _, it := range d.Items {
			if it.Item == item {
				crmRef, version, found = it.CRMRef, it.Version, true
			}
		}
		if !found {
			return Result{}, audit.Errorf(audit.CodeNotFound, "no item %q in event %s/%s", item, key.Source, key.EventID)
		}
	}
	rec := audit.LookupRecord{Source: key.Source, EventID: key.EventID, Item: item, Actor: who.Name,
		Via: who.Via, Result: audit.LookupError, Version: version}
	if err := rec.Validate(); err != nil { // before the CRM hears of it
		return Result{}, err
	}
	vals := map[string]string{"source": key.Source, "event_id": key.EventID, "item": item, "crm_ref": crmRef,
		"idempotency_key": audit.IdempotencyKey(key.Source, key.EventID, item)}
	rec.Result, rec.CRMRef, rec.Message = l.ask(ctx, cfg, vals)
	rec = rec.Stored(l.red)
	if rec, err = l.store.RecordLookup(context.WithoutCancel(ctx), rec); err != nil {
		return Result{}, err
	}
	return l.result(rec, l.now(), version), nil
}

func (l *Lookups) result(r audit.LookupRecord, at time.Time, version int64) Result {
	res := Result{Source: r.Source, EventID: r.EventID, Item: r.Item, Outcome: r.Result, CRMRef: r.CRMRef,
		Message: r.Message, At: at, Actor: r.Actor, Via: r.Via, Version: version}
	if res.Found() {
		res.Link = l.links.CRMOrder(r.Source, r.EventID, r.Item, r.CRMRef)
	}
	return res
}

// ask sends the request and reads the answer: found (with the
// reference), not found, or an error in words.
func (l *Lookups) ask(ctx context.Context, cfg LookupConfig, vals map[string]string) (result, ref, message string) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	select {
	case l.slots[cfg.Source] <- struct{}{}:
		defer func() { <-l.slots[cfg.Source] }()
	case <-ctx.Done():
		l.metrics.CRMLookedUp(cfg.Source, "not_sent", 0)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return audit.LookupError, "", "not sent: the request was cancelled while it waited for the CRM"
		}
		return audit.LookupError, "", fmt.Sprintf("not sent: %d lookups of this CRM were running and none ended within %s",
			MaxLookupsAtOnce, cfg.Timeout)
	}
	start := time.Now()
	defer func() { l.metrics.CRMLookedUp(cfg.Source, result, time.Since(start)) }()
	var body io.Reader
	if cfg.Body != "" {
		body = strings.NewReader(expand(cfg.Body, vals, jsonEscape, jsonEscape))
	}
	req, err := http.NewRequestWithContext(ctx, cfg.Method, expand(cfg.URL, vals, url.PathEscape, url.QueryEscape), body)
	if err != nil {
		return audit.LookupError, "", "the request could not be built: " + err.Error()
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "retryaudit")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range cfg.Headers {
		req.Header.Set(k, v)
	}
	switch {
	case cfg.Token != "" && cfg.TokenHeader != "":
		req.Header.Set(cfg.TokenHeader, cfg.Token)
	case cfg.Token != "":
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return audit.LookupError, "", askError(err, cfg)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, cfg.MaxBody+1))
	switch {
	case err != nil:
		return audit.LookupError, "", "the CRM's answer broke off: " + askError(err, cfg)
	case int64(len(raw)) > cfg.MaxBody:
		return audit.LookupError, "", fmt.Sprintf("the CRM's answer (HTTP %d) is over %d bytes: cut there and not read",
			resp.StatusCode, cfg.MaxBody)
	case cfg.NotFoundStatus != 0 && resp.StatusCode == cfg.NotFoundStatus:
		return audit.LookupNotFound, "", fmt.Sprintf("the CRM answered HTTP %d, which NOT_FOUND_STATUS says means not found",
			resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound:
		return audit.LookupError, "", "the CRM answered HTTP 404, which is not taken as \"not found\": the lookup's URL " +
			"may be wrong (set NOT_FOUND_STATUS=404 if this CRM answers 404 for a missing order)"
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return audit.LookupError, "", fmt.Sprintf("the CRM answered HTTP %d: %s", resp.StatusCode,
			audit.Truncate(strings.TrimSpace(string(raw)), 300))
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // an order number over 2^53 stays as sent
	if err := dec.Decode(&doc); err != nil {
		return audit.LookupError, "", fmt.Sprintf("the CRM's answer (HTTP %d) is not JSON: %s", resp.StatusCode,
			audit.Truncate(strings.TrimSpace(string(raw)), 200))
	}
	switch v, shape := walk(doc, cfg.Found); {
	case shape != "":
		return audit.LookupError, "", fmt.Sprintf("the answer has no data: its shape is not what FOUND (%s) names: %s",
			cfg.Found, shape)
	case empty(v):
		return audit.LookupNotFound, "", fmt.Sprintf("the CRM's answer is empty at %s", cfg.Found)
	}
	v, _ := walk(doc, cfg.Ref)
	if ref = scalar(v); ref == "" {
		return audit.LookupFound, "", fmt.Sprintf("found, but the answer has no reference at %s", cfg.Ref)
	}
	return audit.LookupFound, ref, ""
}

// crmHost is the host a lookup's URL names, as a connection would reach
// it: in lower case, with the scheme's port when none is written. Check
// refused a URL that does not parse, or names no host.
func crmHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Hostname()) + ":" + port
}

// askError says why a request failed, without the URL's query (it may
// hold what the template put there).
func askError(err error, cfg LookupConfig) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the CRM did not answer within %s", cfg.Timeout)
	case errors.Is(err, n8n.ErrRedirectRefused):
		return "the CRM redirected to another address, which is not followed (only the configured host is called)"
	}
	return err.Error()
}

// expand fills a template's placeholders, escaped by path before the
// first '?' and by query after it.
func expand(tmpl string, vals map[string]string, path, query func(string) string) string {
	q := strings.IndexByte(tmpl, '?')
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringIndex(tmpl, -1) {
		b.WriteString(tmpl[last:m[0]])
		v := vals[tmpl[m[0]+1:m[1]-1]]
		if q >= 0 && m[0] > q {
			b.WriteString(query(v))
		} else {
			b.WriteString(path(v))
		}
		last = m[1]
	}
	b.WriteString(tmpl[last:])
	return b.String()
}

// jsonEscape escapes a value for the inside of a JSON string.
func jsonEscape(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSpace(b.String())
	return out[1 : len(out)-1]
}

// walk follows a JSON path (keys of objects, indexes of arrays) and
// says, in shape, why the answer does not have the path's parent: every
// step but the last must exist and be an object (for a key) or an array
// (for an index). The last step may be missing (a key absent from its
// object, an index past its array's end): then v is nil, which empty
// takes for "not found". A wrong base URL or a changed CRM API answers
// another shape, and that is an error, never "not found".
func walk(doc any, path string) (v any, shape string) {
	parts := strings.Split(path, ".")
	for n, part := range parts {
		last := n == len(parts)-1
		where := strings.Join(parts[:n], ".")
		if where == "" {
			where = "the top"
		}
		switch c := doc.(type) {
		case map[string]any:
			next, ok := c[part]
			if !ok && !last {
				return nil, fmt.Sprintf("no %q at %s", part, where)
			}
			doc = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 {
				return nil, fmt.Sprintf("an array at %s, not an object with %q", where, part)
			}
			if i >= len(c) {
				if !last {
					return nil, fmt.Sprintf("the array at %s has no item %d", where, i)
				}
				return nil, ""
			}
			doc = c[i]
		default:
			return nil, fmt.Sprintf("%s is %s, not an object or an array", where, jsonKind(c))
		}
	}
	return doc, ""
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return "a value"
}

// empty is "not found" at the FOUND path: null (or missing, see walk),
// false, a string of only spaces, an empty array or object. Anything else
// (a number, true, a non-empty string, array or object) is found.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return strings.TrimSpace(v) == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// scalar is a reference as text: a string or a number.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return strings.TrimSpace(v)
	case json.Number:
		return v.String()
	}
	return ""
}

// Latest returns the newest lookup of an entry (item "" for the event),
// with ok false when nobody looked it up.
func (l *Lookups) Latest(ctx context.Context, key audit.EventKey, item string) (res Result, ok bool, err error) {
	q, args, err := sqlx.Named(lookupLatest, map[string]any{"source": key.Source, "event_id": key.EventID, "item": item})
	if err != nil {
		return Result{}, false, fmt.Errorf("people: latest lookup: %w", err)
	}
	var row struct {
		At      dbTime `db:"at"`
		Result  string `db:"decision"`
		CRMRef  string `db:"crm_ref"`
		Actor   string `db:"actor"`
		Via     string `db:"delivery"`
		Message string `db:"message"`
		Version int64  `db:"version"`
	}
	switch err := l.store.DB().GetContext(ctx, &row, l.store.DB().Rebind(q), args...); {
	case errors.Is(err, sql.ErrNoRows):
		return Result{}, false, nil
	case err != nil:
		return Result{}, false, &audit.Error{Code: audit.CodeUnavailable, Message: "people: read the latest lookup", Err: err}
	}
	rec := audit.LookupRecord{Source: key.Source, EventID: key.EventID, Item: item, Actor: row.Actor, Via: row.Via,
		Result: row.Result, CRMRef: row.CRMRef, Message: row.Message}
	return l.result(rec, row.At.Time, row.Version), true, nil
}
