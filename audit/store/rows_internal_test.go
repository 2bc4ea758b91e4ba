package store

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

type keepText struct{}

func (keepText) RedactText(s string) string { return s }
func (keepText) Redact(v any) any           { return v }
func (keepText) Version() string            { return "test" }

// TestOneRowTypeATable: each ledger table's row type has a field for every
// column of the table and no column field that is not one (what only the
// lock computes is tagged db:"-"): a column a migration adds has its one
// place in Go. (The migrations make the same columns on both databases:
// TestSchemasDoNotDrift.)
func TestOneRowTypeATable(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: "sqlite:" + filepath.Join(t.TempDir(), "rows.db"), Redactor: keepText{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for table, row := range map[string]any{
		"webhook_events": eventRow{}, "event_items": itemRow{}, "executions": executionRow{},
		"event_executions": presenceRow{}, "event_history": historyRow{}, "n8n_errors": errorRow{},
		"outbox": outboxRow{},
	} {
		var cols []string
		if err := s.db.Select(&cols, `SELECT name FROM pragma_table_info(?) ORDER BY name`, table); err != nil || len(cols) == 0 {
			t.Fatalf("%s: %d columns read: %v", table, len(cols), err)
		}
		var fields []string
		rt := reflect.TypeOf(row)
		for i := range rt.NumField() {
			if tag := rt.Field(i).Tag.Get("db"); tag != "" && tag != "-" {
				fields = append(fields, tag)
			}
		}
		slices.Sort(fields)
		for _, c := range cols {
			if _, ok := slices.BinarySearch(fields, c); !ok {
				t.Errorf("%s.%s has no field in %s", table, c, rt.Name())
			}
		}
		for _, f := range fields {
			if _, ok := slices.BinarySearch(cols, f); !ok {
				t.Errorf("%s.%s is no column of %s", rt.Name(), f, table)
			}
		}
	}
}
