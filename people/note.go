package people

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
)

// Action is a person's act that touches no ledger entry: a refused
// sign-in, a bulk retry run started or cancelled. An act on an entry is a
// line of its history instead (audit.Decider), and the log reads it there.
type Action struct {
	At     time.Time // zero: now
	Actor  string    // the person; for a refused sign-in, the name tried
	Via    string    // audit.ViaPage, ViaAPI or ViaSlack
	Action string    // kind:detail, lower case: signin:refused, bulk_retry:started, bulk_retry:cancelled
	// Source and EventID name what it was about, when anything (a bulk
	// retry's filter names a source).
	Source, EventID string
	Detail          string // in words: what it did, the filter, the count
}

// The actions this package's callers write.
const (
	ActionSignInRefused = "signin:refused"
)

var actionName = regexp.MustCompile(`^[a-z][a-z_]*(:[a-z_]+)?$`)

// Note writes an action that touches no entry in the log of who did what.
func Note(ctx context.Context, st *store.Store, a Action) error {
	if !actionName.MatchString(a.Action) {
		return audit.FieldErrors{"action": fmt.Sprintf("%q is not kind:detail in lower case (e.g. bulk_retry:started)", a.Action)}.Err()
	}
	switch a.Via {
	case audit.ViaPage, audit.ViaAPI, audit.ViaSlack:
	default:
		return audit.FieldErrors{"via": "must be page, api or slack"}.Err()
	}
	if a.At.IsZero() {
		a.At = time.Now()
	}
	if strings.TrimSpace(a.Actor) == "" {
		a.Actor = "(no name)"
	}
	clean := func(s string, n int) string {
		s, _ = audit.CleanText(s)
		return audit.Truncate(strings.TrimSpace(s), n)
	}
	q, args, err := sqlx.Named(actionInsert, map[string]any{"at": st.Time(a.At), "actor": clean(a.Actor, 200),
		"via": a.Via, "action": a.Action, "source": clean(a.Source, audit.MaxNameLen),
		"event_id": clean(a.EventID, audit.MaxEventIDLen), "detail": clean(a.Detail, audit.MaxTextLen)})
	if err != nil {
		return fmt.Errorf("people: note: %w", err)
	}
	if _, err := st.DB().ExecContext(ctx, st.DB().Rebind(q), args...); err != nil {
		return &audit.Error{Code: audit.CodeUnavailable, Message: "people: write the log", Err: err}
	}
	return nil
}

// Prune forgets the actions older than before (the events' retention):
// the log keeps what the history keeps.
func Prune(ctx context.Context, st *store.Store, before time.Time) (int64, error) {
	q, args, err := sqlx.Named(actionPrune, map[string]any{"before": st.Time(before)})
	if err != nil {
		return 0, fmt.Errorf("people: prune: %w", err)
	}
	res, err := st.DB().ExecContext(ctx, st.DB().Rebind(q), args...)
	if err != nil {
		return 0, &audit.Error{Code: audit.CodeUnavailable, Message: "people: prune the log", Err: err}
	}
	return res.RowsAffected()
}
