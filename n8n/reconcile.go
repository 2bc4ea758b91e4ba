package n8n

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// Reconciler records failed executions that never reached the error intake:
// the error workflow is missing, unpublished or failing itself, or n8n did
// not fire it (queue-mode bugs). They become found_by_reconcile errors,
// linked and alerted like the rest.
type Reconciler struct {
	Client *Client
	Store  *audit.Store
	Log    *slog.Logger
	Owner  string // this instance, for the job lease
	// Grace leaves the error workflow time to report an execution that
	// has just failed.
	Grace time.Duration
	// Lease is how long one pass may hold the job; another instance takes
	// over after it.
	Lease time.Duration
	Now   func() time.Time
}

const (
	reconcileCursor = "reconcile.last_execution_id"
	pageSize        = 100
	maxPages        = 20
)

// Run makes one pass: it reads n8n's failed executions newer than the last
// one seen, newest first, page by page, and records those the service has no
// error for. The first pass only notes where n8n stands: older failures are
// not news.
func (r *Reconciler) Run(ctx context.Context) error {
	held, err := r.Store.TakeLease(ctx, "reconcile", r.Owner, r.Lease)
	if err != nil || !held {
		return err
	}
	last, err := r.Store.State(ctx, reconcileCursor)
	if err != nil {
		return err
	}
	lastID, _ := strconv.ParseInt(last, 10, 64)
	found, newest, err := r.newer(ctx, lastID)
	if err != nil {
		return err
	}
	if last == "" {
		r.Log.Info("reconciliation starts after n8n's newest failed execution", "execution_id", newest)
		return r.Store.SetState(ctx, reconcileCursor, strconv.FormatInt(newest, 10))
	}
	upTo := lastID
	now := r.now()
	for _, f := range found { // oldest first
		id, _ := strconv.ParseInt(f.ID, 10, 64)
		if !f.StoppedAt.IsZero() && now.Sub(f.StoppedAt) < r.Grace {
			break // too fresh: the error workflow may still be reporting it; next pass
		}
		if err := r.record(ctx, f); err != nil {
			return err
		}
		upTo = id
	}
	if upTo > lastID {
		return r.Store.SetState(ctx, reconcileCursor, strconv.FormatInt(upTo, 10))
	}
	return nil
}

// newer returns the failed executions with an id above lastID, oldest
// first, and the newest id n8n listed.
func (r *Reconciler) newer(ctx context.Context, lastID int64) ([]Failed, int64, error) {
	var found []Failed
	var newest int64
	cursor := ""
	for page := 0; page < maxPages; page++ {
		list, next, err := r.Client.FailedExecutions(ctx, cursor, pageSize)
		if err != nil {
			return nil, 0, fmt.Errorf("reconcile: %w", err)
		}
		done := next == ""
		for _, f := range list {
			id, err := strconv.ParseInt(f.ID, 10, 64)
			if err != nil {
				continue // n8n's ids are numbers; skip what is not
			}
			newest = max(newest, id)
			if id <= lastID {
				done = true
				continue
			}
			found = append(found, f)
		}
		if done || lastID == 0 {
			break
		}
		cursor = next
	}
	slices.SortFunc(found, func(a, b Failed) int {
		x, _ := strconv.ParseInt(a.ID, 10, 64)
		y, _ := strconv.ParseInt(b.ID, 10, 64)
		return int(x - y)
	})
	return found, newest, nil
}

func (r *Reconciler) record(ctx context.Context, f Failed) error {
	key := "exec:" + f.ID
	if known, err := r.Store.KnownError(ctx, key); err != nil || known {
		return err // the intake has it: nothing was missed
	}
	// The list has no error; the execution's data has, when n8n kept it.
	if full, err := r.Client.FailedExecution(ctx, f.ID); err == nil {
		f.Node, f.Message = full.Node, full.Message
	}
	msg := fmt.Sprintf("n8n lists execution %s as failed and no error reached the intake: "+
		"is the workflow's error workflow set and published?", f.ID)
	if f.Message != "" {
		msg = f.Message + " (" + msg + ")"
	}
	res, err := r.Store.RecordError(ctx, audit.ErrorReport{
		Kind: audit.ErrorReconcile, DedupeKey: key, ExecutionID: f.ID, RetryOf: f.RetryOf,
		WorkflowID: f.WorkflowID, Mode: f.Mode, Node: f.Node, Message: msg,
	})
	if err == nil && !res.Duplicate {
		r.Log.Warn("reconciliation found a failed execution without an error report", "execution_id", f.ID,
			"workflow_id", f.WorkflowID, "linked", res.Linked != nil)
	}
	return err
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
