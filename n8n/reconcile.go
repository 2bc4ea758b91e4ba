package n8n

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/metrics"
)

// Reconciler records failed executions that never reached the error intake:
// the error workflow is missing, unpublished or failing itself, or n8n did
// not fire it (queue-mode bugs). They become found_by_reconcile errors,
// linked and alerted like the rest.
//
// n8n numbers executions when they start and lists failures by id, but an
// execution is a failure only once it stops: a long run can fail after a
// newer one was read. So a pass does not remember "the last id seen"; it
// reads every failure that stopped within a window of stop times — from a
// little before where the last pass ended to Grace ago — and records each
// one it has no error for. The window of one pass overlaps the last one's,
// and the intake's dedupe (one record per execution id) makes reading an
// execution twice harmless.
type Reconciler struct {
	Client  *Client
	Store   *store.Store
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// Grace leaves the error workflow time to report an execution that has
	// just failed (RETRYAUDIT_N8N_RECONCILE_GRACE).
	Grace time.Duration
	// Lookback is the longest an execution may run and still be found: n8n
	// lists by start, so the list is read back to executions that started
	// this long before the window (RETRYAUDIT_N8N_RECONCILE_LOOKBACK).
	Lookback time.Duration
	// Overlap is how far a window reaches back into the last one: writes
	// that n8n committed late and clocks a little apart (default 5m).
	Overlap time.Duration
	Now     func() time.Time
	// Instance names the n8n instance Client reads: the ids it records are
	// kept qualified with it, and its marks apart from other instances'.
	// Empty is the default instance.
	Instance string
	// Budget bounds one pass, reading and recording (default passBudget):
	// an n8n that drips its answers cannot hold the pass, and the next
	// pass reads what this one could not.
	Budget time.Duration

	mu     sync.Mutex
	warned map[string]bool // see once
}

// passBudget is a pass's default budget: n8n's default 10,000 executions
// are 40 pages, read in seconds.
const passBudget = 2 * time.Minute

const (
	// reconcileMark keeps the stop time up to which every failure was read.
	reconcileMark = "reconcile.stopped_through"
	// reconcileSince keeps where the first pass started: older failures
	// are not news.
	reconcileSince = "reconcile.since"
	// legacyMark is where versions that reconciled by id kept their place.
	legacyMark = "reconcile.last_execution_id"
	pageSize   = 250 // the most n8n's API gives per page
	// maxUnplaced is how many failures without a stop time one pass
	// keeps: n8n gives every failure one, so more are not n8n's.
	maxUnplaced = 100
	// maxLoggedFinds is how many new failures a pass logs one by one; past
	// it, one line says how many more it found (each is alerted).
	maxLoggedFinds = 10
)

// Run makes one pass. The first pass only notes where n8n stands: older
// failures are not news. A failure of n8n's API is logged by the Client,
// once per change of state (IsAPIFailure tells it).
func (r *Reconciler) Run(ctx context.Context) error {
	budget := cmp.Or(r.Budget, passBudget)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	now := r.now()
	upper := now.Add(-r.Grace)
	lower, first, err := r.lowerBound(ctx, upper)
	if err != nil {
		return err
	}
	if first {
		r.Log.Info("reconciliation starts: failures that stopped before now are not news", "from", upper)
		if err := r.Store.SetState(ctx, r.key(reconcileSince), stamp(upper)); err != nil {
			return err
		}
		return r.Store.SetState(ctx, r.key(reconcileMark), stamp(upper))
	}
	found, readErr := r.read(ctx, lower, upper)
	slices.SortFunc(found, func(a, b Failed) int { return a.StoppedAt.Compare(b.StoppedAt) })
	news := 0
	defer func() {
		if news > maxLoggedFinds {
			r.Log.Warn("reconciliation found more failed executions without an error report than it logs one by one: "+
				"they are recorded and alerted", "found", news, "logged", maxLoggedFinds)
		}
	}()
	for _, f := range found {
		if ctx.Err() != nil {
			break
		}
		isNew, err := r.record(ctx, f, news < maxLoggedFinds)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("reconcile: record execution %s: %w", f.ID, err)
		}
		if isNew {
			news++
		}
	}
	if readErr == nil && ctx.Err() != nil {
		readErr = fail(stateSlow, fmt.Errorf("reconcile: the pass used up its budget of %s", budget))
	}
	// Told last: the lookups of the executions found do not hide a
	// listing that failed.
	r.Client.observe(ctx, readErr, true)
	if readErr != nil {
		// The window stays where it was: the next pass reads it again.
		r.skipped("page_unreadable", 1)
		return readErr
	}
	return r.Store.SetState(ctx, r.key(reconcileMark), stamp(upper))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// lowerBound returns where this pass's window starts, and whether this is
// the first pass.
func (r *Reconciler) lowerBound(ctx context.Context, upper time.Time) (time.Time, bool, error) {
	mark, err := r.Store.State(ctx, r.key(reconcileMark))
	if err != nil {
		return time.Time{}, false, err
	}
	if mark != "" {
		lower := upper.Add(-r.lookback())
		if t, err := time.Parse(time.RFC3339Nano, mark); err == nil {
			lower = t.Add(-cmp.Or(r.Overlap, 5*time.Minute))
		} else {
			r.Log.Warn("reconciliation mark unreadable: reading back the lookback", "mark", mark)
		}
		// The overlap never reaches back before reconciliation started.
		since, err := r.Store.State(ctx, r.key(reconcileSince))
		if err != nil {
			return time.Time{}, false, err
		}
		if t, err := time.Parse(time.RFC3339Nano, since); err == nil && lower.Before(t) {
			lower = t
		}
		return lower, false, nil
	}
	// An installation that reconciled by id has missed, at worst, the
	// long runs that failed late: read the lookback once.
	legacy, err := r.Store.State(ctx, r.key(legacyMark))
	if err != nil {
		return time.Time{}, false, err
	}
	return upper.Add(-r.lookback()), legacy == "", nil
}

// read pages through n8n's failed executions and returns those that
// stopped within [lower, upper]. It stops at the first page on which every
// execution stopped before the window and started more than the lookback
// before it: in n8n's order (by id, that is by start) nothing after such a
// page can have stopped within the window. An error means a page could not
// be read; what was found before it is returned.
func (r *Reconciler) read(ctx context.Context, lower, upper time.Time) ([]Failed, error) {
	var found []Failed
	startedBefore := lower.Add(-r.lookback())
	cursor := ""
	pages := pager{what: "GET /executions?status=error"}
	unplaced := 0
	for {
		list, next, size, err := r.Client.failedPage(ctx, cursor, pageSize)
		if err != nil {
			return found, fmt.Errorf("reconcile: %w", err)
		}
		beyond := true
		for _, f := range list {
			switch {
			case f.ID == "":
				r.skipped("no_id", 1)
				r.once("no_id", "reconciliation skips the executions n8n lists without an id (counted, not logged again)")
				continue
			case f.StoppedAt.IsZero() && unplaced >= maxUnplaced:
				r.skipped("no_stop_time", 1)
				r.once("no_stop_time", fmt.Sprintf("reconciliation keeps %d failures without a stop time a pass and skips "+
					"the others (counted, not logged again): n8n gives every failure one", maxUnplaced))
				beyond = false
				continue
			case f.StoppedAt.IsZero():
				// A failure with no stop time cannot be placed in a window:
				// record it (the dedupe makes that once). n8n gives every
				// failure one: a pass keeps only so many without.
				found = append(found, f)
				unplaced++
				beyond = false
				continue
			}
			if f.StoppedAt.Before(lower) && f.StartedAt.Before(startedBefore) {
				continue
			}
			beyond = false
			if !f.StoppedAt.Before(lower) && !f.StoppedAt.After(upper) {
				found = append(found, f)
			}
		}
		if beyond || len(list) == 0 {
			return found, nil
		}
		if more, err := pages.next(size, next); !more {
			if err != nil {
				err = fmt.Errorf("reconcile: %w", err)
			}
			return found, err
		}
		cursor = next
	}
}

// record stores one failed execution: new, it becomes a found_by_reconcile
// error (logged when logIt); one the intake has, it only fills in what that
// record lacks. isNew says it was new.
func (r *Reconciler) record(ctx context.Context, f Failed, logIt bool) (isNew bool, err error) {
	id := audit.QualifyID(r.Instance, f.ID)
	key := "exec:" + id
	known, err := r.Store.KnownError(ctx, key)
	if err != nil {
		return false, err
	}
	if !known {
		// The list has no error; the execution's data has, when n8n kept it.
		full, err := r.Client.FailedExecution(ctx, f.ID)
		switch {
		case err == nil:
			f.Node, f.Message = cmp.Or(full.Node, f.Node), full.Message
		case IsAPIFailure(err):
			r.skipped("details_unreadable", 1) // the Client logs n8n's failures
		default:
			r.skipped("details_unreadable", 1)
			r.Log.Debug("reconciliation did not read a failed execution's data; recording what the list says",
				"execution_id", f.ID, "err", err)
		}
	}
	note := fmt.Sprintf("n8n lists execution %s as failed and no error reached the intake: "+
		"is the workflow's error workflow set and published?", f.ID)
	msg := note
	if f.Message != "" {
		msg = f.Message + " (" + note + ")"
	}
	res, err := r.Store.RecordError(ctx, audit.N8NErrorReport{
		Kind: audit.N8NErrorReconcile, DedupeKey: key, ExecutionID: id, RetryOf: audit.QualifyID(r.Instance, f.RetryOf),
		WorkflowID: audit.QualifyID(r.Instance, f.WorkflowID), Mode: f.Mode, Node: f.Node, Message: audit.Truncate(msg, audit.MaxMessageLen),
	})
	if err == nil && !res.Duplicate && logIt {
		r.Log.Warn("reconciliation found a failed execution without an error report", "execution_id", id,
			"workflow_id", f.WorkflowID, "stopped_at", f.StoppedAt, "linked", res.Linked != nil)
	}
	return err == nil && !res.Duplicate, err
}

// key names one of the reconciler's marks: the default instance keeps the
// names of single-instance versions.
func (r *Reconciler) key(name string) string {
	if r.Instance == "" || r.Instance == audit.DefaultInstance {
		return name
	}
	return name + "@" + r.Instance
}

// once logs a warning the first time this reconciler meets what it
// says: what n8n lists is counted by retryaudit_reconcile_skipped_total,
// not logged for every execution of every page.
func (r *Reconciler) once(key, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned[key] {
		return
	}
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	r.warned[key] = true
	r.Log.Warn(msg)
}

func (r *Reconciler) skipped(reason string, n int) {
	r.Metrics.ReconcileSkipped(reason, n)
}

func (r *Reconciler) lookback() time.Duration {
	return cmp.Or(r.Lookback, 24*time.Hour)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
