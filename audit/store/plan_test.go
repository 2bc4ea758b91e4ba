package store_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// broadSearch is a step of a query plan that reads a whole table, or every
// row of one status or one source: in a batch statement it costs as much as
// the table is large, for every batch.
var broadSearch = regexp.MustCompile(`^SCAN (\w+)$|^SEARCH \w+ USING (COVERING )?INDEX \w+ \((status|source)=\?\)$`)

// TestSQLiteBatchesStartFromTheirRows: on SQLite every statement that
// reads a batch's rows (json_each) looks each row up by its key, rather
// than reading every entry of a status and looking it up in the batch.
// The outcome batch's holder read did that: outcomes fell from about 1,900
// to 40 a second once 30,000 entries were processing.
func TestSQLiteBatchesStartFromTheirRows(t *testing.T) {
	s := audittest.Open(t, "sqlite", store.Options{})
	db := s.DB()
	n := 0
	for name, text := range s.Statements() {
		if !strings.Contains(text, "json_each") {
			continue
		}
		n++
		q := db.Rebind(namedParam.ReplaceAllString(text, "$1?"))
		var plan []struct {
			ID     int    `db:"id"`
			Parent int    `db:"parent"`
			Unused int    `db:"notused"`
			Detail string `db:"detail"`
		}
		if err := db.Select(&plan, "EXPLAIN QUERY PLAN "+q, make([]any, strings.Count(q, "?"))...); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, step := range plan {
			if m := broadSearch.FindStringSubmatch(step.Detail); m != nil && m[1] != "j" {
				t.Errorf("%s reads more than its rows: %q\n%s", name, step.Detail, q)
			}
		}
	}
	if n < 10 {
		t.Errorf("checked %d batch statements: the catalogue did not load", n)
	}
}
