package store

import (
	"embed"
	"fmt"
	"reflect"
	"strings"

	"github.com/retryaudit/retryaudit/audit/store/driver"
)

// The .sql files: sql/ where PostgreSQL and SQLite agree, the driver's own
// sql/ where they differ, a file a table. Each statement follows a line
// "-- name: Name", the queries field of that name; the comment lines before
// it document it. Its parameters are named, :name (bind.go). A piece several
// statements share (the same in both, or written once a driver where the
// drivers differ) follows a line "-- fragment: name", in any of the files,
// and "{{name}}" in a statement stands for it.
//
//go:embed sql/*.sql
var sharedFiles embed.FS

// loadQueries fills the statements from the store's sql/ files and the
// driver's own (own, driver.SQLFiles), each fragment put in where a statement names it. A name defined
// twice, a field with no statement, a statement with no field, a fragment
// no statement uses or one used but not defined is an error.
func loadQueries(own string) (queries, error) {
	var q queries
	found, frags := map[string]string{}, map[string]string{}
	for _, f := range []struct{ name, text string }{{"sql/", driver.SQLFiles(sharedFiles)}, {"the driver's sql/", own}} {
		stmts, fs, err := parseQueries(f.text)
		if err != nil {
			return q, fmt.Errorf("audit: %s: %w", f.name, err)
		}
		for name, text := range stmts {
			if _, dup := found[name]; dup {
				return q, fmt.Errorf("audit: statement %s is defined twice (%s)", name, f.name)
			}
			found[name] = text
		}
		for name, text := range fs {
			if _, dup := frags[name]; dup {
				return q, fmt.Errorf("audit: fragment %s is defined twice (%s)", name, f.name)
			}
			frags[name] = text
		}
	}
	if err := putFragments(found, frags); err != nil {
		return q, err
	}
	v := reflect.ValueOf(&q).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		text, ok := found[name]
		if !ok {
			return q, fmt.Errorf("audit: no statement %s in the .sql files", name)
		}
		v.Field(i).SetString(text)
		delete(found, name)
	}
	for name := range found {
		return q, fmt.Errorf("audit: statement %s is in the .sql files but not in the store's queries", name)
	}
	return q, nil
}

// putFragments replaces each "{{name}}" in the statements with the fragment
// of that name: a piece several statements share (the merge of an
// execution row, the counters' CTE), written once. Fragments do not nest:
// one that named itself would never end.
func putFragments(stmts, frags map[string]string) error {
	for name, body := range frags {
		if strings.Contains(body, "{{") {
			return fmt.Errorf("audit: fragment %s names another: fragments do not nest", name)
		}
	}
	used := map[string]bool{}
	for name, text := range stmts {
		for {
			start := strings.Index(text, "{{")
			if start < 0 {
				break
			}
			end := strings.Index(text[start:], "}}")
			if end < 0 {
				return fmt.Errorf("audit: statement %s: an unclosed {{", name)
			}
			frag := text[start+2 : start+end]
			body, ok := frags[frag]
			if !ok {
				return fmt.Errorf("audit: statement %s uses fragment %q, which is not defined", name, frag)
			}
			used[frag] = true
			text = text[:start] + body + text[start+end+2:]
		}
		stmts[name] = text
	}
	for name := range frags {
		if !used[name] {
			return fmt.Errorf("audit: fragment %s is used by no statement", name)
		}
	}
	return nil
}

// parseQueries splits a .sql file at its "-- name: Name" lines, and its
// fragments at "-- fragment: name" lines. Comment lines before a name line
// document the statement that follows; a statement may be empty (the
// driver has nothing to run there).
func parseQueries(text string) (stmts, frags map[string]string, err error) {
	stmts, frags = map[string]string{}, map[string]string{}
	var name string
	var into map[string]string
	var body []string
	flush := func() {
		if name == "" {
			return
		}
		for len(body) > 0 && (strings.TrimSpace(body[len(body)-1]) == "" || strings.HasPrefix(body[len(body)-1], "--")) {
			body = body[:len(body)-1]
		}
		into[name] = strings.Join(body, "\n")
	}
	for _, line := range strings.Split(text, "\n") {
		n, isStmt := strings.CutPrefix(line, "-- name: ")
		f, isFrag := strings.CutPrefix(line, "-- fragment: ")
		if isStmt || isFrag {
			flush()
			name, body, into = strings.TrimSpace(n), nil, stmts
			if isFrag {
				name, into = strings.TrimSpace(f), frags
			}
			if _, dup := into[name]; dup || name == "" {
				return nil, nil, fmt.Errorf("statement or fragment %q is named twice or not at all", name)
			}
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	flush()
	return stmts, frags, nil
}
