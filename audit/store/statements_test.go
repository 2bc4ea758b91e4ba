package store_test

import (
	"regexp"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// namedParam is a :name parameter as bind.go reads it (not PostgreSQL's ::
// cast).
var namedParam = regexp.MustCompile(`(^|[^:]):[a-z_][a-z0-9_]*`)

// TestEveryStatementPrepares: each database parses and plans every
// statement of its catalogue, including those no other test happens to
// run, so that a statement broken on one database fails here and not in
// production.
func TestEveryStatementPrepares(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			s := audittest.Open(t, dialect, store.Options{})
			db := s.DB()
			n := 0
			for name, text := range s.Statements() {
				if text == "" {
					continue // nothing to run on this database (see its sql/ files)
				}
				q := db.Rebind(namedParam.ReplaceAllString(text, "$1?"))
				tx, err := db.Beginx() // SAVEPOINT and SET LOCAL need a transaction
				if err != nil {
					t.Fatal(err)
				}
				st, err := tx.Preparex(q)
				if err != nil {
					t.Errorf("%s: %v\n%s", name, err, q)
				} else {
					st.Close()
					n++
				}
				tx.Rollback()
			}
			if n < 100 {
				t.Errorf("prepared %d statements: the catalogue did not load", n)
			}
		})
	}
}
