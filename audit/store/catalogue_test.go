package store

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
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
		"a statement named twice":       own + "\n-- name: LedgerLock\nSELECT 1\n",
		"a statement no field names":    own + "\n-- name: NoSuchStatement\nSELECT 1\n",
		"a field with no statement":     strings.Replace(own, "-- name: LedgerLock\n", "-- name: LedgerLockRenamed\n", 1),
		"a statement shared and driven": own + "\n-- name: EventRead\nSELECT 1\n",
		"a fragment no statement uses":  own + "\n-- fragment: unused\nSELECT 1\n",
		"a fragment not defined":        strings.Replace(own, "-- name: LedgerLock\n", "-- name: LedgerLock\n{{nosuch}}\n", 1),
		"a fragment inside a fragment": strings.Replace(own, "-- name: LedgerLock\n",
			"-- fragment: outer\n{{counters}}\n\n-- name: LedgerLock\n{{outer}}\n", 1),
		"a fragment defined twice": own + "\n-- fragment: counters\nSELECT 1\n",
		"a fragment left open":     strings.Replace(own, "-- name: LedgerLock\n", "-- name: LedgerLock\n{{counters\n", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := loadQueries(text); err == nil {
				t.Fatal("loaded")
			}
		})
	}
}

func TestParseQueriesKeepsDocCommentsOut(t *testing.T) {
	got, _, err := parseQueries("-- header\n\n-- name: A\nSELECT 1\n  FROM x\n\n-- the doc of B\n-- name: B\n\n-- name: C\nSELECT 3 -- trailing\n")
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

// TestFragmentsArePutIn: a statement that names a fragment holds its text,
// and no statement keeps a "{{".
func TestFragmentsArePutIn(t *testing.T) {
	for driver, own := range map[string]string{"postgres": postgres.Driver{}.Queries(), "sqlite": sqlite.Driver{}.Queries()} {
		q, err := loadQueries(own)
		if err != nil {
			t.Fatal(err)
		}
		v := reflect.ValueOf(q)
		for i := 0; i < v.NumField(); i++ {
			if text := v.Field(i).String(); strings.Contains(text, "{{") {
				t.Errorf("%s: %s keeps a fragment's name:\n%s", driver, v.Type().Field(i).Name, text)
			}
		}
	}
	q, err := loadQueries(postgres.Driver{}.Queries())
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"LedgerWrite": q.LedgerWrite} {
		if !strings.Contains(text, "), counters AS (\n  INSERT INTO stats_hourly") {
			t.Errorf("postgres: %s lacks the counters fragment:\n%s", name, text)
		}
	}
}

// TestEachStatementInItsTablesFile: the statements are kept a file a table,
// named entity first, so that a statement's name says its file.
func TestEachStatementInItsTablesFile(t *testing.T) {
	fileOf := []struct{ prefix, file string }{ // longest prefix first
		{"EventExecution", "executions"}, {"Execution", "executions"}, {"Event", "events"}, {"Item", "events"},
		{"Claim", "events"}, {"Outcome", "events"}, {"Error", "errors"}, {"History", "history"},
		{"Outbox", "outbox"}, {"Thread", "outbox"}, {"Channel", "outbox"}, {"Group", "groups"},
		{"Stats", "stats"}, {"Resolution", "stats"}, {"Overview", "stats"}, {"State", "service"},
		{"Lease", "service"}, {"Redact", "redaction"}, {"Ledger", "ledger"},
	}
	files, err := filepath.Glob("sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"postgres", "sqlite"} {
		more, _ := filepath.Glob(filepath.Join(d, "sql", "*.sql"))
		files = append(files, more...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d .sql files: %v", len(files), files)
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts, _, err := parseQueries(string(text))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name := range stmts {
			want := ""
			for _, p := range fileOf {
				if strings.HasPrefix(name, p.prefix) {
					want = p.file + ".sql"
					break
				}
			}
			if want != filepath.Base(f) {
				t.Errorf("%s is in %s; by its name it belongs in %q", name, f, want)
			}
		}
	}
}

// TestEveryStatementIsUsed: a statement that no code runs is a statement
// the next reader keeps in step for nothing. Each field of queries must be
// named (as .Field) in the package's code.
func TestEveryStatementIsUsed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	selector := regexp.MustCompile(`\.([A-Z]\w*)\b`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "queries.go" {
			continue
		}
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range selector.FindAllStringSubmatch(string(text), -1) {
			named[m[1]] = true
		}
	}
	q := reflect.TypeOf(queries{})
	for i := 0; i < q.NumField(); i++ {
		if name := q.Field(i).Name; !named[name] {
			t.Errorf("statement %s: no code runs it", name)
		}
	}
}

// TestNoPositionalPlaceholders: every statement names its parameters
// (:name, bound by bind.go), so that a call passes them by name and no
// argument list is kept in step with a statement's order of ?s. A ? outside
// a string literal or a comment is a positional placeholder.
func TestNoPositionalPlaceholders(t *testing.T) {
	literal := regexp.MustCompile(`'[^']*'|--[^\n]*`)
	for driver, own := range map[string]string{"postgres": postgres.Driver{}.Queries(), "sqlite": sqlite.Driver{}.Queries()} {
		q, err := loadQueries(own)
		if err != nil {
			t.Fatal(err)
		}
		v := reflect.ValueOf(q)
		for i := 0; i < v.NumField(); i++ {
			if text := v.Field(i).String(); strings.Contains(literal.ReplaceAllString(text, ""), "?") {
				t.Errorf("%s: %s has a positional placeholder:\n%s", driver, v.Type().Field(i).Name, text)
			}
		}
	}
}
