package store

import (
	"context"
	"encoding/json"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// storedText is one column that holds text from n8n: the table, its key,
// the column and how to redact it.
var storedText = []struct {
	table, key, column, where string
	json                      int // 0 text; 1 n8n's payload, by structure; 2 our own JSON, its strings only
}{
	{"n8n_errors", "id", "message", "", 0},
	{"n8n_errors", "id", "n8n_url", "", 0},
	{"n8n_errors", "id", "payload", "", 1},
	{"n8n_errors", "id", "workflow_name", "", 0},
	{"n8n_errors", "id", "node", "", 0},
	{"event_history", "id", "message", " AND kind IN ('error', 'outcome', 'not_holder')", 0},
	{"event_history", "id", "workflow_name", "", 0},
	{"event_history", "id", "node", "", 0},
	{"executions", "execution_id", "n8n_url", "", 0},
	{"executions", "execution_id", "workflow_name", "", 0},
	// The group's key is a hash of the node's name as it was: an open
	// group keeps its thread, the next error opens a new one.
	{"alert_groups", "group_key", "node", "", 0},
	{"outbox", "id", "payload", "", 2},
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
	for _, c := range storedText {
		last := ""
		if c.key == "id" {
			last = "0"
		}
		for {
			var rows []struct {
				Key   string `db:"k"`
				Value string `db:"v"`
			}
			// Keys compare as text for executions and as numbers for ids.
			cmp := c.key + " > ?"
			var arg any = last
			if c.key == "id" {
				cmp = "id > CAST(? AS BIGINT)"
			}
			if err := s.selectAll(ctx, s.db, &rows, "read stored text", `SELECT `+c.key+` AS k, `+c.column+
				` AS v FROM `+c.table+` WHERE `+cmp+c.where+` ORDER BY `+c.key+` LIMIT 200`, arg); err != nil {
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
					if _, err := s.exec(ctx, tx, "redact stored text", `UPDATE `+c.table+` SET `+c.column+
						` = ? WHERE `+c.key+` = `+castKey(c.key), v, r.Key); err != nil {
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

func castKey(key string) string {
	if key == "id" {
		return "CAST(? AS BIGINT)"
	}
	return "?"
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
