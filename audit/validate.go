package audit

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what callers send. They keep rows and pages small; a key longer
// than these is almost always a whole payload sent by mistake.
const (
	MaxSourceLen  = 100
	MaxEventIDLen = 500
	MaxIDLen      = 100 // execution and workflow ids
	MaxNameLen    = 500 // workflow and node names
	MaxItemLen    = 200
	MaxItems      = 1000
	MaxTextLen    = 2000 // reasons and notes
)

// FieldErrors maps an input field to what is wrong with it.
type FieldErrors map[string]string

// Err returns an invalid-input error naming every field, or nil.
// Its message names them too: n8n shows a failed node's message, not the
// fields.
func (f FieldErrors) Err() error {
	if len(f) == 0 {
		return nil
	}
	parts := make([]string, 0, len(f))
	for field, problem := range f {
		parts = append(parts, field+": "+problem)
	}
	slices.Sort(parts)
	return &Error{Code: CodeInvalid, Message: "invalid request: " + strings.Join(parts, "; "), Fields: f}
}

// Add records a problem with a field, keeping the first one.
func (f FieldErrors) Add(field, problem string) {
	if _, ok := f[field]; !ok {
		f[field] = problem
	}
}

func (f FieldErrors) source(field, v string) {
	if v == "" {
		f.Add(field, "required")
		return
	}
	if len(v) > MaxSourceLen || !sourceChars(v) {
		f.Add(field, fmt.Sprintf("must be 1 to %d characters: letters, digits and . _ : -", MaxSourceLen))
	}
}

func sourceChars(v string) bool {
	for _, r := range v {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == ':' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// text checks an optional (required=false) or required free-text value:
// valid UTF-8, at most max characters, no control characters.
// id checks an execution or workflow id: text of at most MaxIDLen
// characters, not counting the instance it is qualified with.
func (f FieldErrors) id(field, v string, required bool) {
	if i := strings.LastIndex(v, InstanceSep); i > 0 && ValidInstance(v[i+1:]) {
		v = v[:i]
	}
	f.text(field, v, required, MaxIDLen)
}

func (f FieldErrors) text(field, v string, required bool, max int) {
	f.check(field, v, required, max, false)
}

// note is like text but allows line breaks and tabs, for reasons and notes
// that people write.
func (f FieldErrors) note(field, v string, required bool, max int) {
	f.check(field, v, required, max, true)
}

func (f FieldErrors) check(field, v string, required bool, max int, multiline bool) {
	switch {
	case v == "" && required:
		f.Add(field, "required")
	case !utf8.ValidString(v):
		f.Add(field, "must be valid UTF-8")
	case utf8.RuneCountInString(v) > max:
		f.Add(field, fmt.Sprintf("must be at most %d characters", max))
	case hasControl(v, multiline):
		f.Add(field, "must not contain control characters")
	}
}

// hasControl reports a control character; lines allows line breaks and
// tabs.
func hasControl(v string, lines bool) bool {
	for _, r := range v {
		if unicode.IsControl(r) && !(lines && (r == '\n' || r == '\r' || r == '\t')) {
			return true
		}
	}
	return false
}

// ValidateKey checks a source and event id as they come in a path or a form.
func ValidateKey(source, eventID string) error {
	f := FieldErrors{}
	f.source("source", source)
	f.text("event_id", eventID, true, MaxEventIDLen)
	return f.Err()
}

// ValidateExecutionID checks an execution id as it comes in a path.
func ValidateExecutionID(id string) error {
	f := FieldErrors{}
	f.text("id", id, true, MaxIDLen)
	return f.Err()
}

// Validate checks a list's filters as they come in a query string, the
// cursor's parts included: nothing reaches the database that it could
// refuse.
func (f EventFilter) Validate() error {
	errs := FieldErrors{}
	if f.Source != "" {
		errs.source("source", f.Source)
	}
	errs.text("prefix", f.Prefix, false, MaxEventIDLen)
	if f.Instance != "" && !ValidInstance(f.Instance) {
		errs.Add("instance", "must name an n8n instance (lower-case letters, digits and -)")
	}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		errs.Add("status", fmt.Sprintf("must be one of %v", Statuses))
	}
	if f.Cursor != "" {
		if _, source, eventID, err := DecodeCursor(f.Cursor); err != nil || ValidateKey(source, eventID) != nil {
			errs.Add("cursor", "not a cursor this service returned")
		}
	}
	return errs.Err()
}
