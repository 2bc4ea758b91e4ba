package store

import (
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit/store/postgres"
	"github.com/retryaudit/retryaudit/audit/store/sqlite"
)

func TestEveryDriverHasEveryStatement(t *testing.T) {
	for _, own := range map[string]string{"postgres": postgres.Driver{}.Queries(), "sqlite": sqlite.Driver{}.Queries()} {
		if _, err := loadQueries(own); err != nil {
			t.Error(err)
		}
	}
}

func TestABrokenCatalogueStopsOpen(t *testing.T) {
	own := postgres.Driver{}.Queries()
	for name, text := range map[string]string{
		"a statement named twice":       own + "\n-- name: LeaseOutbox\nSELECT 1\n",
		"a statement no field names":    own + "\n-- name: NoSuchStatement\nSELECT 1\n",
		"a field with no statement":     strings.Replace(own, "-- name: LeaseOutbox\n", "-- name: LeaseOutboxRenamed\n", 1),
		"a statement shared and driven": own + "\n-- name: ReadEvent\nSELECT 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := loadQueries(text); err == nil {
				t.Fatal("loaded")
			}
		})
	}
}

func TestParseQueriesKeepsDocCommentsOut(t *testing.T) {
	got, err := parseQueries("-- header\n\n-- name: A\nSELECT 1\n  FROM x\n\n-- the doc of B\n-- name: B\n\n-- name: C\nSELECT 3 -- trailing\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "SELECT 1\n  FROM x", "B": "", "C": "SELECT 3 -- trailing"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d statements, want %d", len(got), len(want))
	}
}
