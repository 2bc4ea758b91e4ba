package people

import (
	"context"
	"database/sql/driver"
	"encoding/csv"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/audit/store/sqlite"
)

// LogEntry is one person's action.
type LogEntry struct {
	Origin  string    `db:"origin" json:"-"` // h: an event's history line; p: an action touching no entry
	ID      int64     `db:"id" json:"-"`
	At      time.Time `db:"-" json:"at"`
	RawAt   dbTime    `db:"at" json:"-"`
	Actor   string    `db:"actor" json:"actor"`
	Via     string    `db:"via" json:"via"`
	Action  string    `db:"action" json:"action"`
	Source  string    `db:"source" json:"source,omitempty"`
	EventID string    `db:"event_id" json:"event_id,omitempty"`
	Item    string    `db:"item" json:"item,omitempty"`
	CRMRef  string    `db:"crm_ref" json:"crm_ref,omitempty"`
	Detail  string    `db:"detail" json:"detail,omitempty"`
}

// LogFilter selects log entries: each set field narrows; From is
// inclusive, Until exclusive. Cursor continues a page (LogPage.Next).
type LogFilter struct {
	Actor, Action, Source string
	From, Until           time.Time
	Cursor                string
	Limit                 int // 1 to 1000; 0 for 50
}

// LogPage is one page of the log, newest first; Next continues it ("" on
// the last page).
type LogPage struct {
	Entries []LogEntry
	Next    string
}

var actionFilter = regexp.MustCompile(`^[a-z_]+(:[a-z_]+)?$`)

// Validate checks the filter and names each bad field.
func (f LogFilter) Validate() error {
	e := audit.FieldErrors{}
	if f.Action != "" && !actionFilter.MatchString(f.Action) {
		e.Add("action", "is a kind (resolution, lookup, signin) or kind:detail (resolution:done)")
	}
	if f.Limit < 0 || f.Limit > 1000 {
		e.Add("limit", "must be 1 to 1000")
	}
	if !f.From.IsZero() && !f.Until.IsZero() && !f.From.Before(f.Until) {
		e.Add("from", "must be before until")
	}
	if _, _, _, err := parseCursor(f.Cursor); err != nil {
		e.Add("cursor", "is not a cursor this log gave")
	}
	if len(f.Actor) > 200 || len(f.Source) > audit.MaxNameLen {
		e.Add("actor", "too long")
	}
	return e.Err()
}

// Read returns a page of the log of who did what.
func Read(ctx context.Context, st *store.Store, f LogFilter) (LogPage, error) {
	if err := f.Validate(); err != nil {
		return LogPage{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = 50
	}
	from, until := f.From, f.Until
	if until.IsZero() {
		until = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	cAt, cOrigin, cID, _ := parseCursor(f.Cursor)
	q, args, err := sqlx.Named(logRead, map[string]any{"from": st.Time(from), "until": st.Time(until),
		"actor": f.Actor, "source": f.Source, "action": f.Action, "cursor_at": st.Time(cAt),
		"cursor_origin": cOrigin, "cursor_id": cID, "limit": limit + 1})
	if err != nil {
		return LogPage{}, fmt.Errorf("people: log: %w", err)
	}
	var rows []LogEntry
	if err := st.DB().SelectContext(ctx, &rows, st.DB().Rebind(q), args...); err != nil {
		return LogPage{}, &audit.Error{Code: audit.CodeUnavailable, Message: "people: read the log", Err: err}
	}
	page := LogPage{Entries: rows}
	if len(rows) > limit {
		page.Entries = rows[:limit]
		last := page.Entries[limit-1]
		page.Next = fmt.Sprintf("%d.%s.%d", last.RawAt.UTC().UnixNano(), last.Origin, last.ID)
	}
	for i := range page.Entries {
		page.Entries[i].At = page.Entries[i].RawAt.Time
	}
	return page, nil
}

// parseCursor reads "unixnano.origin.id"; "" is before everything.
func parseCursor(c string) (time.Time, string, int64, error) {
	if c == "" {
		return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), "z", 0, nil
	}
	parts := strings.Split(c, ".")
	if len(parts) != 3 || (parts[1] != "h" && parts[1] != "p") {
		return time.Time{}, "", 0, fmt.Errorf("bad cursor")
	}
	ns, err1 := strconv.ParseInt(parts[0], 10, 64)
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, "", 0, fmt.Errorf("bad cursor")
	}
	return time.Unix(0, ns).UTC(), parts[1], id, nil
}

// dbTime reads a time however the database hands it over: a UNION's
// column may come from SQLite as text.
type dbTime struct{ time.Time }

// Scan implements sql.Scanner.
func (t *dbTime) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		t.Time = v.UTC()
		return nil
	case string:
		return t.parse(v)
	case []byte:
		return t.parse(string(v))
	}
	return fmt.Errorf("people: a time of type %T", v)
}

func (t *dbTime) parse(s string) error {
	for _, layout := range []string{sqlite.TimeLayout, time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00"} {
		if p, err := time.Parse(layout, s); err == nil {
			t.Time = p.UTC()
			return nil
		}
	}
	return fmt.Errorf("people: %q is not a time", s)
}

// Value implements driver.Valuer (never used to write; for completeness).
func (t dbTime) Value() (driver.Value, error) { return t.Time, nil }

// Export writes every entry f selects as CSV with a header, newest first,
// from f.Cursor on, reading 1,000 at a time, each read within perPage (0:
// ctx's deadline only); with f.Limit, one page of that many, and the
// cursor of the rest ("" when nothing is left). Nothing
// is written before the first read answered, so that its error can still
// be answered as an error; a later read's error is returned after what was
// written, and the caller must not let the cut file pass as whole. A cell
// a spreadsheet would read as a formula (starting with = + - @, a tab or a
// carriage return) is prefixed with a quote: names, notes and event ids
// come from people and senders.
func Export(ctx context.Context, st *store.Store, f LogFilter, w io.Writer, perPage time.Duration) (next string, err error) {
	whole := f.Limit == 0
	if whole {
		f.Limit = 1000
	}
	var cw *csv.Writer
	for {
		page, err := readWithin(ctx, st, f, perPage)
		if err != nil {
			if cw != nil {
				cw.Flush()
			}
			return "", err
		}
		if cw == nil {
			cw = csv.NewWriter(w)
			if err := cw.Write([]string{"at", "actor", "via", "action", "source", "event_id", "item", "crm_ref", "detail"}); err != nil {
				return "", err
			}
		}
		for _, e := range page.Entries {
			rec := []string{e.At.UTC().Format(time.RFC3339Nano), e.Actor, e.Via, e.Action, e.Source, e.EventID, e.Item,
				e.CRMRef, e.Detail}
			for i, cell := range rec {
				rec[i] = safeCell(cell)
			}
			if err := cw.Write(rec); err != nil {
				return "", err
			}
		}
		if !whole || page.Next == "" {
			cw.Flush()
			return page.Next, cw.Error()
		}
		f.Cursor = page.Next
	}
}

func readWithin(ctx context.Context, st *store.Store, f LogFilter, d time.Duration) (LogPage, error) {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	return Read(ctx, st, f)
}

func safeCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
