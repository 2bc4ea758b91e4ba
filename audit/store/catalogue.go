package store

import (
	_ "embed"
	"fmt"
	"reflect"
	"strings"
)

//go:embed shared.sql
var sharedQueries string

// loadQueries fills the statements from shared.sql and the driver's own
// file. A name defined twice, a field with no statement or a statement with
// no field is an error.
func loadQueries(own string) (queries, error) {
	var q queries
	found := map[string]string{}
	for _, f := range []struct{ name, text string }{{"shared.sql", sharedQueries}, {"the driver's queries.sql", own}} {
		stmts, err := parseQueries(f.text)
		if err != nil {
			return q, fmt.Errorf("audit: %s: %w", f.name, err)
		}
		for name, text := range stmts {
			if _, dup := found[name]; dup {
				return q, fmt.Errorf("audit: statement %s is defined twice (%s)", name, f.name)
			}
			found[name] = text
		}
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

// parseQueries splits a .sql file at its "-- name: Name" lines. Comment
// lines before a name line document the statement that follows; a
// statement may be empty (the driver has nothing to run there).
func parseQueries(text string) (map[string]string, error) {
	out := map[string]string{}
	var name string
	var body []string
	flush := func() {
		if name == "" {
			return
		}
		for len(body) > 0 && (strings.TrimSpace(body[len(body)-1]) == "" || strings.HasPrefix(body[len(body)-1], "--")) {
			body = body[:len(body)-1]
		}
		out[name] = strings.Join(body, "\n")
	}
	for _, line := range strings.Split(text, "\n") {
		if n, ok := strings.CutPrefix(line, "-- name: "); ok {
			flush()
			name, body = strings.TrimSpace(n), nil
			if _, dup := out[name]; dup || name == "" {
				return nil, fmt.Errorf("statement %q is named twice or not at all", name)
			}
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	flush()
	return out, nil
}
