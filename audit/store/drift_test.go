package store_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestSchemasDoNotDrift: the SQLite and PostgreSQL migrations make the same
// tables with the same columns, so that one store's statements mean the
// same on both. A migration written for one database only fails here.
func TestSchemasDoNotDrift(t *testing.T) {
	pg := columns(t, audittest.Open(t, "postgres", store.Options{}).DB(), `SELECT table_name || '.' || column_name
		FROM information_schema.columns WHERE table_schema = current_schema() AND table_name NOT LIKE 'goose%'`)
	lite := columns(t, audittest.Open(t, "sqlite", store.Options{}).DB(), `SELECT m.name || '.' || p.name
		FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite%' AND m.name NOT LIKE 'goose%'`)
	if len(pg) == 0 || len(lite) == 0 {
		t.Fatalf("no columns read: %d on PostgreSQL, %d on SQLite", len(pg), len(lite))
	}
	for _, c := range pg {
		if _, ok := slices.BinarySearch(lite, c); !ok {
			t.Errorf("%s is on PostgreSQL only", c)
		}
	}
	for _, c := range lite {
		if _, ok := slices.BinarySearch(pg, c); !ok {
			t.Errorf("%s is on SQLite only", c)
		}
	}
}

func columns(t *testing.T, db *sqlx.DB, query string) []string {
	t.Helper()
	var out []string
	if err := db.Select(&out, query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	for i := range out {
		out[i] = strings.ToLower(out[i])
	}
	slices.Sort(out)
	return out
}
