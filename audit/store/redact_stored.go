package store

import (
	"context"
	"encoding/json"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// storedColumn is one column that holds text from n8n: the statements that
// read and write it (sql/redaction.sql), whether its key is a number, and how to
// redact it.
type storedColumn struct {
	read, redact string
	numericKey   bool
	json         int // 0 text; 1 n8n's payload, by structure; 2 our own JSON, its strings only
}

// storedText lists the columns that hold text from n8n.
func (q queries) storedText() []storedColumn {
	return []storedColumn{
		{q.RedactReadN8nErrorsMessage, q.RedactWriteN8nErrorsMessage, true, 0},
		{q.RedactReadN8nErrorsN8nUrl, q.RedactWriteN8nErrorsN8nUrl, true, 0},
		{q.RedactReadN8nErrorsPayload, q.RedactWriteN8nErrorsPayload, true, 1},
		{q.RedactReadN8nErrorsWorkflowName, q.RedactWriteN8nErrorsWorkflowName, true, 0},
		{q.RedactReadN8nErrorsNode, q.RedactWriteN8nErrorsNode, true, 0},
		{q.RedactReadEventHistoryMessage, q.RedactWriteEventHistoryMessage, true, 0},
		{q.RedactReadEventHistoryWorkflowName, q.RedactWriteEventHistoryWorkflowName, true, 0},
		{q.RedactReadEventHistoryNode, q.RedactWriteEventHistoryNode, true, 0},
		{q.RedactReadExecutionsN8nUrl, q.RedactWriteExecutionsN8nUrl, false, 0},
		{q.RedactReadExecutionsWorkflowName, q.RedactWriteExecutionsWorkflowName, false, 0},
		// The group's key is a hash of the node's name as it was: an open
		// group keeps its thread, the next error opens a new one.
		{q.RedactReadAlertGroupsNode, q.RedactWriteAlertGroupsNode, false, 0},
		{q.RedactReadOutboxPayload, q.RedactWriteOutboxPayload, true, 2},
	}
}

// RedactStored redacts, with today's rules, the n8n text that an earlier
// version stored (errors, history messages, execution links, workflow and
// node names, alerts not yet sent), so that no credential it let through
// stays readable. It runs once per version of the Redactor's rules, in
// batches of one short transaction each, and returns how many values it
// changed.
func (s *Store) RedactStored(ctx context.Context) (int, error) {
	done, err := s.State(ctx, "redaction.version")
	if err != nil || done == s.redact.Version() {
		return 0, err
	}
	changed := 0
	for _, c := range s.q.storedText() {
		last := ""
		if c.numericKey {
			last = "0"
		}
		for {
			var rows []struct {
				Key   string `db:"k"`
				Value string `db:"v"`
			}
			if err := s.selectAll(ctx, s.db, &rows, "read stored text", c.read, last); err != nil {
				return changed, err
			}
			if len(rows) == 0 {
				break
			}
			err := s.inTx(ctx, func(tx *sqlx.Tx) error {
				for _, r := range rows {
					v := redactStoredValue(s.redact, r.Value, c.json)
					if v == r.Value {
						continue
					}
					if _, err := s.exec(ctx, tx, "redact stored text", c.redact, v, r.Key); err != nil {
						return err
					}
					changed++
				}
				return nil
			})
			if err != nil {
				return changed, err
			}
			last = rows[len(rows)-1].Key
		}
	}
	return changed, s.SetState(ctx, "redaction.version", s.redact.Version())
}

// redactStoredValue redacts one stored value; a JSON document stays valid
// (a cut payload is not JSON and is redacted as text).
func redactStoredValue(red audit.Redactor, v string, kind int) string {
	if kind == 0 {
		return red.RedactText(v)
	}
	var doc any
	if err := json.Unmarshal([]byte(v), &doc); err != nil {
		if kind == 2 {
			return v
		}
		return red.RedactText(v)
	}
	before, _ := json.Marshal(doc)
	if kind == 1 {
		doc = red.Redact(doc)
	} else {
		doc = redactStrings(red, doc)
	}
	after, err := json.Marshal(doc)
	if err != nil || string(after) == string(before) {
		return v // unchanged: keep the document's own layout
	}
	if kind == 1 {
		after, _ = json.MarshalIndent(doc, "", "  ")
	}
	return string(after)
}

// redactStrings redacts every string of a document and nothing else: the
// keys are our own (an alert's), not n8n's.
func redactStrings(red audit.Redactor, v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			t[k] = redactStrings(red, val)
		}
	case []any:
		for i, val := range t {
			t[i] = redactStrings(red, val)
		}
	case string:
		return red.RedactText(t)
	}
	return v
}
