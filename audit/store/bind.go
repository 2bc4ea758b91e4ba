package store

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"
	"github.com/retryaudit/retryaudit/audit"
)

// Named statements. A statement names its parameters (:name); its text is
// compiled once, the first time it runs: for PostgreSQL every :name becomes
// $n, for SQLite it stays and its values are bound by name (so that a
// statement of several, SQLite's LedgerWrite, binds each one's by name).
// A parameter's value comes from the field of the params struct with that
// db tag, or from a map's key.

// compiled is a named statement as sent to the database.
type compiled struct {
	query string
	names []string // the parameters: PostgreSQL's $1, $2, …; SQLite's names
	named bool     // bind by name (SQLite)
}

// compile returns a statement compiled for the store's database, from its
// cache.
func (s *Store) compile(query string) compiled {
	if c, ok := s.compiledQ.Load(query); ok {
		return c.(compiled)
	}
	c := compileNamed(query, s.db.DriverName() != "postgres")
	s.compiledQ.Store(query, c)
	return c
}

// compileNamed finds the :name parameters of query outside string
// literals. Positional (named false): each distinct name becomes $n.
func compileNamed(query string, named bool) compiled {
	c := compiled{named: named}
	var b strings.Builder
	at := map[string]int{}
	for i := 0; i < len(query); i++ {
		ch := query[i]
		if ch == '\'' { // a literal: copied to its closing quote
			j := strings.IndexByte(query[i+1:], '\'')
			if j < 0 {
				j = len(query) - i - 1
			}
			b.WriteString(query[i : i+j+2])
			i += j + 1
			continue
		}
		if ch != ':' || i+1 >= len(query) || !nameStart(query[i+1]) || i > 0 && query[i-1] == ':' {
			b.WriteByte(ch)
			continue
		}
		j := i + 1
		for j < len(query) && (nameStart(query[j]) || query[j] >= '0' && query[j] <= '9') {
			j++
		}
		name := query[i+1 : j]
		n, ok := at[name]
		if !ok {
			c.names = append(c.names, name)
			n = len(c.names)
			at[name] = n
		}
		if named {
			b.WriteString(query[i:j])
		} else {
			b.WriteString("$" + strconv.Itoa(n))
		}
		i = j - 1
	}
	c.query = b.String()
	return c
}

func nameStart(ch byte) bool { return ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' }

// args returns the values of a compiled statement's parameters from arg (a
// struct with db tags, or a map[string]any).
func (s *Store) args(c compiled, arg any) ([]any, error) {
	out := make([]any, len(c.names))
	if len(c.names) == 0 {
		return out, nil
	}
	put := func(i int, v any) {
		if c.named {
			v = sql.Named(c.names[i], v)
		}
		out[i] = v
	}
	if m, ok := arg.(map[string]any); ok {
		for i, name := range c.names {
			v, ok := m[name]
			if !ok {
				return nil, fmt.Errorf("no value for :%s", name)
			}
			put(i, v)
		}
		return out, nil
	}
	v := reflect.Indirect(reflect.ValueOf(arg))
	paths := s.db.Mapper.TraversalsByName(v.Type(), c.names)
	for i, path := range paths {
		if len(path) == 0 {
			return nil, fmt.Errorf("no value for :%s in %s", c.names[i], v.Type())
		}
		put(i, reflectx.FieldByIndexesReadOnly(v, path).Interface())
	}
	return out, nil
}

// run binds arg to a named statement and runs it on q (the pool or a
// transaction), prepared, with do. It classifies the errors but
// sql.ErrNoRows, which it returns unwrapped.
func (s *Store) run(ctx context.Context, q any, op, query string, arg any, do func(*sqlx.Stmt, string, []any) error) error {
	c := s.compile(query)
	args, err := s.args(c, arg)
	if err != nil {
		return &audit.Error{Code: audit.CodeInternal, Message: op + ": bind", Err: err}
	}
	defer s.metrics.Ran(op, time.Now())
	if err = do(s.prepared(q, c.query), c.query, args); err != nil && !isNoRows(err) {
		return s.dbError(op, err)
	}
	return err
}

// one runs a statement and scans its one row into dest: sql.ErrNoRows
// when there is none.
func (s *Store) one(ctx context.Context, q any, dest any, op, query string, arg any) error {
	return s.run(ctx, q, op, query, arg, func(st *sqlx.Stmt, query string, args []any) error {
		if st != nil {
			return st.GetContext(ctx, dest, args...)
		}
		return sqlx.GetContext(ctx, q.(sqlx.QueryerContext), dest, query, args...)
	})
}

// namedGet is one that reports whether there was a row.
func (s *Store) namedGet(ctx context.Context, q any, dest any, op, query string, arg any) (bool, error) {
	err := s.one(ctx, q, dest, op, query, arg)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// namedSelect runs a statement and scans its rows into dest.
func (s *Store) namedSelect(ctx context.Context, q any, dest any, op, query string, arg any) error {
	return s.run(ctx, q, op, query, arg, func(st *sqlx.Stmt, query string, args []any) error {
		if st != nil {
			return st.SelectContext(ctx, dest, args...)
		}
		return sqlx.SelectContext(ctx, q.(sqlx.QueryerContext), dest, query, args...)
	})
}

// selectAs runs a statement, scans its rows as R (a table's row type) and
// returns each converted.
func selectAs[R, V any](ctx context.Context, s *Store, q any, op, query string, arg any, as func(R) V) ([]V, error) {
	var rows []R
	err := s.namedSelect(ctx, q, &rows, op, query, arg)
	out := make([]V, len(rows))
	for i, r := range rows {
		out[i] = as(r)
	}
	return out, err
}

// kindCounts reads a statement's rows of (kind, n) as counts by kind, and
// their sum.
func (s *Store) kindCounts(ctx context.Context, q any, op, query string, arg any) (map[string]int, int, error) {
	var rows []struct {
		Kind string `db:"kind"`
		N    int    `db:"n"`
	}
	err := s.namedSelect(ctx, q, &rows, op, query, arg)
	counts, total := map[string]int{}, 0
	for _, r := range rows {
		counts[r.Kind], total = r.N, total+r.N
	}
	return counts, total, err
}

// namedExec runs a statement and returns the number of rows it changed.
func (s *Store) namedExec(ctx context.Context, q any, op, query string, arg any) (int64, error) {
	var n int64
	err := s.run(ctx, q, op, query, arg, func(st *sqlx.Stmt, query string, args []any) error {
		var res sql.Result
		var err error
		if st != nil {
			res, err = st.ExecContext(ctx, args...)
		} else {
			res, err = q.(sqlx.ExecerContext).ExecContext(ctx, query, args...)
		}
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	return n, err
}

// execEach runs statements in turn with one arg, each after the name of its
// op (op, query, op, query, …), and returns how many rows the last changed.
func (s *Store) execEach(ctx context.Context, tx *sqlx.Tx, arg any, opQuery ...string) (n int64, err error) {
	for i := 0; i+1 < len(opQuery) && err == nil; i += 2 {
		n, err = s.namedExec(ctx, tx, opQuery[i], opQuery[i+1], arg)
	}
	return n, err
}
