package audit

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The kinds of error record.
const (
	ErrorExecution = "execution_error"    // a run failed
	ErrorTrigger   = "trigger_error"      // the trigger itself failed: no execution
	ErrorUnknown   = "unknown_shape"      // a payload the service does not recognise
	ErrorTest      = "test_payload"       // the editor's sample, not an incident
	ErrorReconcile = "found_by_reconcile" // n8n lists it as failed; no error reached the intake
)

const (
	// MaxStoredPayload caps the raw payload kept per error.
	MaxStoredPayload = 64 << 10
	// MaxMessageLen caps a stored error message; pages and alerts cut shorter.
	MaxMessageLen = 4000
)

// ErrorReport is what the service learned from one error payload.
type ErrorReport struct {
	Kind         string
	DedupeKey    string
	ExecutionID  string
	RetryOf      string
	WorkflowID   string
	WorkflowName string
	Mode         string
	Node         string
	Message      string
	HTTPCode     string
	URL          string // execution.url as n8n built it
	Payload      string // redacted JSON, capped
	Truncated    bool
	// Note says what the intake changed to record the payload: replaced
	// bytes, a body cut at the size limit.
	Note string
}

// NoteCleaned is the note of a report whose text held NUL or invalid
// UTF-8, which PostgreSQL cannot store.
const NoteCleaned = "NUL characters or invalid UTF-8 in the payload were replaced by U+FFFD"

// NoteVisible is the note of a report whose strings held bytes that are not
// UTF-8 or lone surrogate escapes: the intake writes them out as text
// (\xff, \ud800) so that two ids that differ only there stay two.
const NoteVisible = `bytes that are not UTF-8 and lone surrogates in the payload were written out as text (\xff, \ud800)`

// AddNote adds a note, once.
func (r *ErrorReport) AddNote(note string) {
	switch {
	case strings.Contains(r.Note, note):
	case r.Note == "":
		r.Note = note
	default:
		r.Note += "; " + note
	}
}

// ParseErrorPayload reads an Error Trigger item as n8n emits it. Every JSON
// object is accepted: what the service does not recognise becomes an
// unknown_shape record, because an error workflow that is refused fails in
// its turn and nobody hears of either. raw is the body as received, v the
// same body decoded (with json.Number for numbers).
func ParseErrorPayload(raw []byte, v map[string]any) ErrorReport {
	return ParseErrorBody(sha256.Sum256(raw), v)
}

// ParseErrorBody is ParseErrorPayload for a body that was read as a stream:
// sum is the SHA-256 of its bytes, v what was kept of it.
func ParseErrorBody(sum [32]byte, v map[string]any) ErrorReport {
	r := ErrorReport{}
	if _, cleaned := cleanValue(v); cleaned {
		r.AddNote(NoteCleaned)
	}
	wf, _ := v["workflow"].(map[string]any)
	r.WorkflowID, r.WorkflowName = idString(wf["id"]), str(wf["name"])
	exec, _ := v["execution"].(map[string]any)
	trig, _ := v["trigger"].(map[string]any)
	var errObj map[string]any
	switch {
	case exec != nil && idString(exec["id"]) != "":
		r.Kind = ErrorExecution
		r.ExecutionID, r.RetryOf = idString(exec["id"]), idString(exec["retryOf"])
		r.Mode, r.URL, r.Node = str(exec["mode"]), str(exec["url"]), str(exec["lastNodeExecuted"])
		errObj, _ = exec["error"].(map[string]any)
		if r.Mode == "manual" && r.WorkflowName == "Example Workflow" {
			r.Kind = ErrorTest
		}
	case trig != nil:
		r.Kind = ErrorTrigger
		r.Mode = str(trig["mode"])
		errObj, _ = trig["error"].(map[string]any)
	default:
		r.Kind = ErrorUnknown
	}
	if node, ok := errObj["node"].(map[string]any); ok && str(node["name"]) != "" {
		r.Node = str(node["name"])
	}
	r.HTTPCode = idString(errObj["httpCode"])
	// n8n 2.41 drops trigger.error.message when it serialises the item; the
	// error workflow sends it beside the item as "message".
	r.Message = cmp.Or(str(errObj["message"]), str(v["message"]), str(errObj["description"]))
	// n8n's HTTP node says "The service was not able to process your
	// request" and keeps what the server said in the description.
	if desc := str(errObj["description"]); desc != "" && desc != r.Message {
		r.Message += ": " + desc
	}
	if r.Message == "" {
		r.Message = defaultMessage(r.Kind, v)
	}
	// n8n quotes the request and the answer in its messages: credentials
	// included. Workflows and nodes are named by people, freely.
	r.Message = Truncate(RedactText(r.Message), MaxMessageLen)
	r.URL = RedactText(r.URL)
	r.WorkflowName, r.Node = RedactText(r.WorkflowName), RedactText(r.Node)
	for _, f := range []*string{&r.ExecutionID, &r.RetryOf, &r.WorkflowID, &r.HTTPCode} {
		*f = Truncate(*f, MaxIDLen)
	}
	for _, f := range []*string{&r.WorkflowName, &r.Mode, &r.Node, &r.URL} {
		*f = Truncate(*f, MaxNameLen)
	}
	r.Payload, r.Truncated = storedPayload(v)
	switch r.Kind {
	case ErrorExecution:
		r.DedupeKey = "exec:" + r.ExecutionID
	case ErrorTest:
		r.DedupeKey = "test:" + r.ExecutionID
	default:
		r.DedupeKey = "sha256:" + hex.EncodeToString(sum[:])
	}
	return r
}

func defaultMessage(kind string, v map[string]any) string {
	switch kind {
	case ErrorTrigger:
		return "the trigger failed; n8n sent no message (add a top-level message to the error workflow's body)"
	case ErrorUnknown:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return fmt.Sprintf("n8n sent a payload of an unknown shape (keys: %s)", strings.Join(keys, ", "))
	}
	return "n8n sent no error message"
}

// stored returns the report as the store keeps it, whoever built it: every
// text valid UTF-8 without NUL; the message, the URL and the workflow's and
// the node's names redacted.
func (r ErrorReport) stored() ErrorReport {
	cleaned := false
	for _, f := range []*string{&r.DedupeKey, &r.ExecutionID, &r.RetryOf, &r.WorkflowID, &r.WorkflowName,
		&r.Mode, &r.Node, &r.Message, &r.HTTPCode, &r.URL, &r.Payload, &r.Note} {
		var c bool
		*f, c = CleanText(*f)
		cleaned = cleaned || c
	}
	if cleaned {
		r.AddNote(NoteCleaned)
	}
	r.Message, r.URL = RedactText(r.Message), RedactText(r.URL)
	r.WorkflowName, r.Node = RedactText(r.WorkflowName), RedactText(r.Node)
	return r
}

// storedPayload redacts the payload and caps its size. A capped payload is
// no longer valid JSON; it is kept as text, flagged truncated.
func storedPayload(v map[string]any) (string, bool) {
	b, err := json.MarshalIndent(Redact(v), "", "  ")
	if err != nil {
		return "", false
	}
	if len(b) <= MaxStoredPayload {
		return string(b), false
	}
	cut := MaxStoredPayload
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]), true
}

// str returns v when it is a string; absent, null and anything else are "".
func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}

// idString returns an id sent as a string or as a number.
func idString(v any) string {
	switch t := v.(type) {
	case string:
		return strings.TrimSpace(t)
	case json.Number:
		return t.String()
	case float64:
		return fmt.Sprint(t)
	}
	return ""
}
