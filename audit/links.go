package audit

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Links builds the URLs that pages and alerts point to.
type Links struct {
	BaseURL      string            // this service, as people reach it
	N8NEditorURL string            // the default n8n instance's editor, for execution links
	CRM          map[string]string // source → order URL template
	// Instances are the other n8n instances, by name: their editor URLs
	// ("" when none is configured).
	Instances map[string]string
}

// KnownInstance reports whether name is an n8n instance other than the
// default one.
func (l Links) KnownInstance(name string) bool {
	_, ok := l.Instances[name]
	return ok
}

// Instance returns the n8n instance an id the service keeps belongs to,
// and the id that instance knows.
func (l Links) Instance(qid string) (instance, id string) {
	return SplitID(qid, l.KnownInstance)
}

// Event returns the audit row of an event. Both parts are escaped as path
// segments, so ids with '/', '%', spaces or any Unicode round-trip. A part
// that browsers (and Slack, and curl) would resolve as a dot segment, "."
// or "..", cannot stand in a path however it is escaped (%2E is a dot to
// them too): such a key is linked as /events/~/{base64url source}/{base64url
// id}; "~" is no valid source.
func (l Links) Event(source, eventID string) string {
	if dotSegment(source) || dotSegment(eventID) {
		return l.BaseURL + "/events/" + EncodedKeyMark + "/" + base64.RawURLEncoding.EncodeToString([]byte(source)) +
			"/" + base64.RawURLEncoding.EncodeToString([]byte(eventID))
	}
	return l.BaseURL + "/events/" + url.PathEscape(source) + "/" + url.PathEscape(eventID)
}

// EncodedKeyMark stands in the source's place of an event link whose parts
// are base64url-encoded.
const EncodedKeyMark = "~"

// DecodeEventPath reads the rest of an /events/~/… path.
func DecodeEventPath(rest string) (string, string, bool) {
	s64, id64, ok := strings.Cut(rest, "/")
	if !ok {
		return "", "", false
	}
	source, err1 := base64.RawURLEncoding.DecodeString(s64)
	eventID, err2 := base64.RawURLEncoding.DecodeString(id64)
	return string(source), string(eventID), err1 == nil && err2 == nil
}

func dotSegment(s string) bool { return s == "." || s == ".." }

// Error returns the page of an error record.
func (l Links) Error(id int64) string {
	return l.BaseURL + "/errors/" + strconv.FormatInt(id, 10)
}

// Execution returns the service's page of an execution; an id that is a
// dot segment is linked as /exec/{base64url id}.
func (l Links) Execution(id string) string {
	if dotSegment(id) {
		return l.BaseURL + "/exec/" + base64.RawURLEncoding.EncodeToString([]byte(id))
	}
	return l.BaseURL + "/executions/" + url.PathEscape(id)
}

// Editor returns the editor URL of the instance an execution belongs to,
// "" when none is configured.
func (l Links) Editor(executionID string) string {
	if instance, _ := l.Instance(executionID); instance != DefaultInstance {
		return l.Instances[instance]
	}
	return l.N8NEditorURL
}

// N8NExecution returns an execution's page in n8n's editor, built from the
// editor URL configured for the execution's instance, or "" without one (or
// without a workflow id of that instance). Every outward link is built from
// configuration: the URL an error payload carries (execution.url) may say
// anything and is shown as text only, never linked.
func (l Links) N8NExecution(workflowID, executionID string) string {
	instance, exec := l.Instance(executionID)
	wfInstance, wf := l.Instance(workflowID)
	if editor := l.Editor(executionID); editor != "" && wf != "" && exec != "" && wfInstance == instance {
		return editor + "/workflow/" + url.PathEscape(wf) + "/executions/" + url.PathEscape(exec)
	}
	return ""
}

// NoN8NLink says why an execution has no link into n8n's editor.
func (l Links) NoN8NLink(workflowID, executionID string) string {
	switch instance, _ := l.Instance(executionID); {
	case l.Editor(executionID) == "" && instance == DefaultInstance:
		return "no link: set RETRYAUDIT_N8N_EDITOR_URL"
	case l.Editor(executionID) == "":
		return "no link: set the editor URL of n8n instance " + instance
	case executionID == "":
		return "no link: no execution id"
	}
	return "no link: no workflow id of the execution's n8n instance"
}

// CRMOrder returns the CRM's page of an event's order, or "" when the
// source has no template.
func (l Links) CRMOrder(source, eventID, item, crmRef string) string {
	tmpl, ok := l.CRM[source]
	if !ok {
		return ""
	}
	return expandCRM(tmpl, map[string]string{"source": source, "event_id": eventID, "item": item, "crm_ref": crmRef})
}

var placeholder = regexp.MustCompile(`\{[a-z_]+\}`)

// expandCRM fills a template's placeholders, each escaped for where it
// stands: as a query value after the '?', as a path segment before it.
func expandCRM(tmpl string, vals map[string]string) string {
	query := strings.IndexByte(tmpl, '?')
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringIndex(tmpl, -1) {
		b.WriteString(tmpl[last:m[0]])
		v := vals[tmpl[m[0]+1:m[1]-1]]
		if query >= 0 && m[0] > query {
			b.WriteString(url.QueryEscape(v))
		} else {
			b.WriteString(url.PathEscape(v))
		}
		last = m[1]
	}
	b.WriteString(tmpl[last:])
	return b.String()
}

// ParseCRMLinks reads RETRYAUDIT_CRM_LINKS: source=template pairs separated
// by commas. A template must be an http(s) URL and may use {source},
// {event_id}, {item} and {crm_ref}.
func ParseCRMLinks(s string) (map[string]string, error) {
	links := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		source, tmpl, ok := strings.Cut(pair, "=")
		source, tmpl = strings.TrimSpace(source), strings.TrimSpace(tmpl)
		if !ok || source == "" || tmpl == "" {
			return nil, fmt.Errorf("%q is not source=URL", pair)
		}
		for _, p := range placeholder.FindAllString(tmpl, -1) {
			switch p {
			case "{source}", "{event_id}", "{item}", "{crm_ref}":
			default:
				return nil, fmt.Errorf("%s: unknown placeholder %s (use {source}, {event_id}, {item}, {crm_ref})", source, p)
			}
		}
		u, err := url.Parse(expandCRM(tmpl, map[string]string{}))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s: %q is not an http(s) URL", source, tmpl)
		}
		// A value from a request may fill the path and the query, never
		// the host: "https://crm.example{crm_ref}" with "@evil.example"
		// would link elsewhere.
		_, host, _ := strings.Cut(tmpl, "://")
		if end := strings.IndexAny(host, "/?#"); end >= 0 {
			host = host[:end]
		}
		if strings.Contains(host, "{") {
			return nil, fmt.Errorf("%s: %q: placeholders may stand in the path and the query only, not in the host", source, tmpl)
		}
		links[source] = tmpl
	}
	return links, nil
}
