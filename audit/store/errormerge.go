package store

import (
	"cmp"
	"strings"

	"github.com/retryaudit/retryaudit/audit"
)

// mergeError returns the stored record e with what a second report of the
// same execution adds, and whether anything changed. Empty fields are filled
// in; a payload is kept when the record has none (a reconciliation record
// has none, and one whose payload retention dropped it stays dropped). The
// message that carries n8n's own words is kept: a payload's message replaces
// a reconciliation record's only when that one lacks n8n's error (n8n had
// pruned the execution's data), and a reconciliation record never replaces
// a payload's message, which n8n wrote.
func mergeError(e audit.N8NErrorRecord, r audit.N8NErrorReport) (audit.N8NErrorRecord, bool) {
	m := e
	m.RetryOf = cmp.Or(e.RetryOf, r.RetryOf)
	m.WorkflowID = cmp.Or(e.WorkflowID, r.WorkflowID)
	m.WorkflowName = cmp.Or(e.WorkflowName, r.WorkflowName)
	m.Mode = cmp.Or(e.Mode, r.Mode)
	m.Node = cmp.Or(e.Node, r.Node)
	m.HTTPCode = cmp.Or(e.HTTPCode, r.HTTPCode)
	m.URL = cmp.Or(e.URL, r.URL)
	if e.Payload == "" && !e.PayloadDropped && r.Payload != "" {
		m.Payload, m.PayloadTruncated = r.Payload, r.Truncated
	}
	switch {
	case e.Message == "" || e.Message == audit.DefaultMessage(e.Kind, nil):
		m.Message = cmp.Or(r.Message, e.Message)
	case (e.Kind == audit.N8NErrorReconcile || e.Kind == audit.N8NErrorHook) && r.Kind == audit.N8NErrorExecution && r.Message != audit.DefaultMessage(r.Kind, nil) &&
		!strings.Contains(e.Message, r.Message):
		m.Message = r.Message
	}
	return m, m != e
}
