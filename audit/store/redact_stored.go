package store

import (
	"context"
	"encoding/json"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// storedTable is a table that holds text from n8n: the statements that read
// and write it (sql/redaction.sql), whether its key is a number, and how its
// payload is redacted (1 n8n's, by structure; 2 our own JSON, its strings
// only).
type storedTable struct {
	read, write string
	numericKey  bool
	payload     int
}

// storedText lists the tables that hold text from n8n.
func (q queries) storedText() []storedTable {
	return []storedTable{{q.RedactReadN8nErrors, q.RedactWriteN8nErrors, true, 1},
		{q.RedactReadEventHistory, q.RedactWriteEventHistory, true, 0},
		{q.RedactReadExecutions, q.RedactWriteExecutions, false, 0},
		{q.RedactReadAlertGroups, q.RedactWriteAlertGroups, false, 0}, {q.RedactReadOutbox, q.RedactWriteOutbox, true, 2}}
}

// storedRow is a row of a storedTable: its key and its columns of n8n text
// (empty where the table has none).
type storedRow struct {
	Key          string `db:"k"`
	Message      string `db:"message"`
	URL          string `db:"n8n_url"`
	Payload      string `db:"payload"`
	WorkflowName string `db:"workflow_name"`
	Node         string `db:"node"`
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
	for _, t := range s.q.storedText() {
		last := ""
		if t.numericKey {
			last = "0"
		}
		for {
			var rows []storedRow
			if err := s.namedSelect(ctx, s.db, &rows, "read stored text", t.read, map[string]any{"after": last}); err != nil {
				return changed, err
			}
			if len(rows) == 0 {
				break
			}
			err := s.inTx(ctx, func(tx *sqlx.Tx) error {
				for _, r := range rows {
					arg, n := map[string]any{"k": r.Key}, 0 // a column left NULL is left as it is
					for _, c := range []struct {
						name, v string
						kind    int
					}{{"message", r.Message, 0}, {"n8n_url", r.URL, 0}, {"payload", r.Payload, t.payload},
						{"workflow_name", r.WorkflowName, 0}, {"node", r.Node, 0}} {
						arg[c.name] = nil
						if v := redactStoredValue(s.redact, c.v, c.kind); v != c.v {
							arg[c.name], n = v, n+1
						}
					}
					if n == 0 {
						continue
					}
					if _, err := s.namedExec(ctx, tx, "redact stored text", t.write, arg); err != nil {
						return err
					}
					changed += n
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
