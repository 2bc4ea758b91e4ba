package audit

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// The kinds of error record.
const (
	N8NErrorExecution = "execution_error"    // a run failed
	N8NErrorTrigger   = "trigger_error"      // the trigger itself failed: no execution
	N8NErrorUnknown   = "unknown_shape"      // a payload the service does not recognise
	N8NErrorTest      = "test_payload"       // the editor's sample, not an incident
	N8NErrorReconcile = "found_by_reconcile" // n8n lists it as failed; no error reached the intake
	N8NErrorHook      = "found_by_hook"      // n8n's execution hooks reported the failure
)

const (
	// MaxStoredPayload caps the raw payload kept per error.
	MaxStoredPayload = 64 << 10
	// MaxMessageLen caps a stored error message; pages and alerts cut shorter.
	MaxMessageLen = 4000
)

// N8NErrorReport is what the service learned of one failed n8n run or
// trigger: from an Error Trigger payload (n8n.ParseErrorTrigger) or from
// reconciliation. It is n8n's error, not a Go error (Error); the store keeps
// it as an N8NErrorRecord.
type N8NErrorReport struct {
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

// NoteOneLine is the note of a report whose workflow or node name held
// control characters, written out as text (audit.OneLine).
const NoteOneLine = `control characters in the workflow or node name were written out as text (\n)`

// BodyDedupeKey is the dedupe key of a report that names no execution it
// can be known by: the SHA-256 of the body's bytes, so that the same body
// sent twice is one error and two bodies are two.
func BodyDedupeKey(sum [32]byte) string { return "sha256:" + hex.EncodeToString(sum[:]) }

// IDProblem says why an id from outside cannot be kept as sent ("" when it
// can): the rules of a claim's ids, valid UTF-8, no control characters, at
// most MaxIDLen characters.
func IDProblem(id string) string {
	f := FieldErrors{}
	f.id("id", id, false)
	return f["id"]
}

// RefuseID drops one of the report's ids, which could not be kept exactly
// as it was sent (field is the payload's name for it, such as
// execution.id), and says so in the note. An error whose execution id is
// refused names no execution: it is recorded as unknown_shape, linked to
// nothing and told apart by its body (sum), so that an id can neither be
// read as another one nor merge two errors.
func (r *N8NErrorReport) RefuseID(field, problem string, sum [32]byte) {
	switch field {
	case "execution.id":
		r.ExecutionID, r.RetryOf = "", ""
		if r.Kind == N8NErrorExecution || r.Kind == N8NErrorTest {
			r.Kind = N8NErrorUnknown
		}
		r.DedupeKey = BodyDedupeKey(sum)
	case "execution.retryOf":
		r.RetryOf = ""
	case "workflow.id":
		r.WorkflowID = ""
	}
	r.AddNote(field + " was not used as an id: it " + problem)
}

// AddNote adds a note, once.
func (r *N8NErrorReport) AddNote(note string) {
	switch {
	case strings.Contains(r.Note, note):
	case r.Note == "":
		r.Note = note
	default:
		r.Note += "; " + note
	}
}

// DefaultMessage is the message of a report of kind whose payload carried
// none; keys are the payload's top-level keys, which an unknown_shape
// message lists in the order given. The store compares a record's message
// with it (keys nil) to tell n8n's words from a stand-in.
func DefaultMessage(kind string, keys []string) string {
	switch kind {
	case N8NErrorTrigger:
		return "the trigger failed; n8n sent no message (add a top-level message to the error workflow's body)"
	case N8NErrorUnknown:
		return fmt.Sprintf("n8n sent a payload of an unknown shape (keys: %s)", strings.Join(keys, ", "))
	}
	return "n8n sent no error message"
}

// stored returns the report as the store keeps it, whoever built it: every
// text valid UTF-8 without NUL; the message, the URL and the workflow's and
// the node's names redacted; the names, the mode and the HTTP code on one
// line.
func (r N8NErrorReport) Stored(red Redactor) N8NErrorReport {
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
	r.Message, r.URL = red.RedactText(r.Message), red.RedactText(r.URL)
	r.WorkflowName, r.Node = red.RedactText(r.WorkflowName), red.RedactText(r.Node)
	lines := false
	for _, f := range []*string{&r.WorkflowName, &r.Node, &r.Mode, &r.HTTPCode} {
		one := OneLine(*f)
		lines = lines || one != *f
		*f = one
	}
	if lines {
		r.AddNote(NoteOneLine)
	}
	return r
}
