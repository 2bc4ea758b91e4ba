// Package retries asks n8n to retry failed executions for people ("Retry
// in n8n"), one entry at a time or in bulk runs, guarded by the ledger:
// only a failed entry, only as the person saw it, never twice at once.
// Each retry is written in the entry's history (audit.Decider.Retry)
// before n8n is asked; the Retry's own report then settles the entry.
package retries

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
)

// N8N is what a retry asks of n8n. Ids are the service's (qualified with
// their instance); an instance without an API answers audit.ErrNoAPI.
type N8N interface {
	// ExecutionNow says what n8n says of an execution now.
	ExecutionNow(ctx context.Context, id string) (audit.N8NExecution, error)
	// Retry retries a failed execution and returns the new one, once it
	// has finished (audit.ErrExecutionNotFound: pruned;
	// audit.ErrNotRetryable: n8n refused).
	Retry(ctx context.Context, id string) (audit.N8NExecution, error)
}

// Config is what a Retrier needs; cmd/retryaudit fills it.
type Config struct {
	Store *store.Store
	N8N   N8N // nil: no n8n API is configured, nothing can be retried
	// Rate is how many retries a bulk run starts a minute
	// (RETRYAUDIT_RETRY_RATE, default 30); InFlight how many of its
	// retries wait for n8n at once (RETRYAUDIT_RETRY_IN_FLIGHT, default 2).
	Rate     int
	InFlight int
	// Owner names this instance in the runs it runs (host and process).
	Owner string
	// PendingFor is how long a retry n8n did not answer stays pending
	// (refusing another) unless the entry moved: 10 minutes by default.
	PendingFor time.Duration
	Log        *slog.Logger
	Now        func() time.Time
}

// Retrier sends retries and runs bulk runs.
type Retrier struct {
	cfg  Config
	db   db
	wg   sync.WaitGroup
	mu   sync.Mutex
	runs map[int64]bool // the runs this instance is running
	base context.Context
}

// New returns a Retrier; Start runs (and adopts) bulk runs.
func New(cfg Config) *Retrier {
	cfg.Rate = cmp.Or(cfg.Rate, 30)
	cfg.InFlight = cmp.Or(cfg.InFlight, 2)
	cfg.PendingFor = cmp.Or(cfg.PendingFor, 10*time.Minute)
	cfg.Owner = cmp.Or(cfg.Owner, "retryaudit")
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Retrier{cfg: cfg, db: db{cfg.Store.DB()}, runs: map[int64]bool{}, base: context.Background()}
}

// Rate and InFlight are the bulk runs' settings.
func (r *Retrier) Rate() int     { return r.cfg.Rate }
func (r *Retrier) InFlight() int { return r.cfg.InFlight }

// Who is the person asking, and the way they asked: page, api or slack.
type Who struct {
	Name string
	Via  string
}

// Result is what came of one retry sent to n8n.
type Result struct {
	audit.EntryKey
	// State: succeeded (n8n's Retry finished successfully), failed (it
	// failed again), no_answer (n8n did not answer in time; its report
	// settles the entry).
	State          string `json:"state"`
	ExecutionID    string `json:"execution_id"`     // the execution retried
	NewExecutionID string `json:"new_execution_id"` // n8n's Retry
	N8NStatus      string `json:"n8n_status,omitempty"`
	Message        string `json:"message"`
}

// Refusal is why an entry is not retried: nothing was sent to n8n.
type Refusal struct {
	Reason  string // one of the Reason constants
	Message string
	Status  audit.Status // the entry's status, when it has one
	Version int64        // its version now
}

// The reasons an entry is not retried.
const (
	ReasonNotFound  = "not_found"
	ReasonItems     = "items"
	ReasonChanged   = "changed"
	ReasonPending   = "retry_pending"
	ReasonNoFailed  = "no_failed_execution"
	ReasonPruned    = "pruned"
	ReasonNoAPI     = "n8n_unavailable"
	ReasonNotFailed = "not_failed" // processing, done or cancelled: the status says which
)

func (e *Refusal) Error() string { return "retries: " + e.Message }

// Code is the domain code of a refusal, for the handlers' statuses.
func (e *Refusal) Code() audit.Code {
	switch e.Reason {
	case ReasonNotFound:
		return audit.CodeNotFound
	case ReasonItems:
		return audit.CodeInvalid
	case ReasonNoAPI:
		return audit.CodeUnavailable
	}
	return audit.CodeConflict
}

// One asks n8n to retry an entry's failed execution for a person, fenced
// by the entry's version the person saw: the entry must be failed, as seen,
// with no retry waiting for its outcome, and n8n must still have the failed
// execution. The request is written in the ledger first, then n8n is asked;
// One returns once n8n's Retry has finished (or n8n did not answer in
// time). A refusal is a *Refusal; nothing was sent.
func (r *Retrier) One(ctx context.Context, key audit.EntryKey, version int64, who Who) (Result, error) {
	if err := (audit.RetryRequest{Source: key.Source, EventID: key.EventID, Item: key.Item, Version: version,
		Actor: who.Name, Via: who.Via, ExecutionID: "x"}).Validate(); err != nil {
		return Result{}, err
	}
	// The person waits for n8n's answer: a closed page does not cut it.
	return r.send(ctx, context.WithoutCancel(ctx), key, version, who, 0, 0)
}

// target is what a check found: the entry's version and the execution to
// retry.
type target struct {
	version     int64
	status      audit.Status
	executionID string
}

// check decides whether an entry may be retried now, as seen at version
// (0: as it is), and which execution: the newest of its holder's lineage,
// which n8n must say failed.
func (r *Retrier) check(ctx context.Context, key audit.EntryKey, version int64) (target, error) {
	d, err := r.cfg.Store.Event(ctx, key.Source, key.EventID)
	if audit.ErrorCode(err) == audit.CodeNotFound {
		return target{}, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf("no event %s/%s", key.Source, key.EventID)}
	}
	if err != nil {
		return target{}, err
	}
	t := target{version: d.Version, status: d.Status, executionID: d.HolderExecutionID}
	switch {
	case key.Item == "" && d.ItemCount > 0:
		return t, &Refusal{Reason: ReasonItems, Status: d.Status, Version: d.Version,
			Message: "this event was claimed with items: retry one item"}
	case key.Item != "":
		i := slices.IndexFunc(d.Items, func(it audit.Item) bool { return it.Item == key.Item })
		if i < 0 {
			return t, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf("no item %q in event %s/%s", key.Item,
				key.Source, key.EventID)}
		}
		it := d.Items[i]
		t = target{version: it.Version, status: it.Status, executionID: it.HolderExecutionID}
	}
	refuse := func(reason, format string, args ...any) (target, error) {
		return t, &Refusal{Reason: reason, Status: t.status, Version: t.version, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case version != 0 && version != t.version:
		return refuse(ReasonChanged, "the entry changed since it was seen (version %d, now %d: %s): nothing was sent",
			version, t.version, t.status)
	case t.status == audit.StatusProcessing:
		return refuse(ReasonNotFailed, "the entry is processing: an execution may still be acting on it, or it waits for "+
			"a person (mark it failed first if no order exists); only a failed entry is retried")
	case t.status == audit.StatusDone:
		return refuse(ReasonNotFailed, "the entry is done: it happened, a retry would act twice")
	case t.status != audit.StatusFailed:
		return refuse(ReasonNotFailed, "the entry is %s: only a failed entry is retried", t.status)
	}
	if p, ok, err := r.pending(ctx, key, t.version); err != nil {
		return t, err
	} else if ok {
		return refuse(ReasonPending, "a retry was sent at %s by %s (via %s), waiting for its outcome",
			time.UnixMilli(p.SentAt).UTC().Format(time.RFC3339), p.Actor, p.Via)
	}
	t.executionID = newestOfLineage(d.Executions, t.executionID)
	if t.executionID == "" {
		return refuse(ReasonNoFailed, "no failed execution: no execution holds the entry")
	}
	if r.cfg.N8N == nil {
		return refuse(ReasonNoAPI, "n8n's API is not configured (RETRYAUDIT_N8N_API_URL): nothing can be retried")
	}
	x, err := r.cfg.N8N.ExecutionNow(ctx, t.executionID)
	switch {
	case errors.Is(err, audit.ErrExecutionNotFound):
		return refuse(ReasonPruned, "pruned: n8n no longer has execution %s (its executions are pruned after a while); "+
			"deliver the event again from its sender instead", t.executionID)
	case errors.Is(err, audit.ErrNoAPI):
		return refuse(ReasonNoAPI, "n8n's API is not configured for execution %s's instance", t.executionID)
	case err != nil:
		return refuse(ReasonNoAPI, "n8n's API did not answer about execution %s: %s", t.executionID,
			strings.TrimPrefix(err.Error(), "n8n: "))
	case x.Status != "error" && x.Status != "crashed":
		return refuse(ReasonNoFailed, "no failed execution: n8n says execution %s is %s", t.executionID,
			cmp.Or(x.Status, "of no status"))
	}
	return t, nil
}

// newestOfLineage is the newest execution of the holder's lineage that
// touched the event (a Retry that failed again is retried, not the one it
// retried); the holder when none is known.
func newestOfLineage(xs []audit.EventExecution, holder string) string {
	root := ""
	for _, x := range xs {
		if x.ID == holder {
			root = cmp.Or(x.Root, x.ID)
		}
	}
	newest := holder
	var at time.Time
	for _, x := range xs {
		if x.ID == holder {
			at = x.FirstSeenAt
		}
	}
	for _, x := range xs {
		if root != "" && cmp.Or(x.Root, x.ID) == root && x.Mode == "retry" && !x.FirstSeenAt.Before(at) {
			newest, at = x.ID, x.FirstSeenAt
		}
	}
	return newest
}

// item is one row of retry_items.
type item struct {
	ID             int64         `db:"id" json:"-"`
	RunID          sql.NullInt64 `db:"run_id" json:"-"`
	Source         string        `db:"source" json:"source"`
	EventID        string        `db:"event_id" json:"event_id"`
	Item           string        `db:"item" json:"item,omitempty"`
	Version        int64         `db:"version" json:"version"`
	ExecutionID    string        `db:"execution_id" json:"execution_id,omitempty"`
	State          string        `db:"state" json:"state"`
	Reason         string        `db:"reason" json:"reason,omitempty"`
	Actor          string        `db:"actor" json:"-"`
	Via            string        `db:"via" json:"-"`
	NewExecutionID string        `db:"new_execution_id" json:"new_execution_id,omitempty"`
	N8NStatus      string        `db:"n8n_status" json:"n8n_status,omitempty"`
	SentAt         int64         `db:"sent_at" json:"-"`
	UpdatedAt      int64         `db:"updated_at" json:"-"`
}

// pending returns an entry's retry that waits for its outcome: sent (or
// not answered by n8n) within PendingFor, with the entry not moved since.
func (r *Retrier) pending(ctx context.Context, key audit.EntryKey, version int64) (item, bool, error) {
	var it item
	err := r.db.get(ctx, &it, itemPending, key)
	if errors.Is(err, sql.ErrNoRows) {
		return it, false, nil
	}
	if err != nil {
		return it, false, err
	}
	recent := r.cfg.Now().Sub(time.UnixMilli(it.SentAt)) < r.cfg.PendingFor
	return it, recent && it.Version == version, nil
}

// send checks an entry, writes the request in the ledger, records it and
// asks n8n, waiting for its answer as long as wait lasts (and RetryTimeout);
// run and itemID are the run and its item being sent (0: a single retry).
func (r *Retrier) send(ctx, wait context.Context, key audit.EntryKey, version int64, who Who, run, itemID int64) (Result, error) {
	t, err := r.check(ctx, key, version)
	if err != nil {
		return Result{}, err
	}
	err = r.cfg.Store.Retry(ctx, audit.RetryRequest{Source: key.Source, EventID: key.EventID, Item: key.Item,
		Version: t.version, Actor: who.Name, Via: who.Via, ExecutionID: t.executionID, Run: run})
	var ae *audit.Error
	if errors.As(err, &ae) && ae.Code == audit.CodeConflict {
		return Result{}, &Refusal{Reason: ReasonChanged, Status: ae.Status, Message: ae.Message}
	}
	if err != nil {
		return Result{}, err
	}
	now := r.cfg.Now().UnixMilli()
	it := item{ID: itemID, Source: key.Source, EventID: key.EventID, Item: key.Item, Version: t.version + 1,
		ExecutionID: t.executionID, State: "sending", Actor: who.Name, Via: who.Via, SentAt: now, UpdatedAt: now}
	if itemID == 0 {
		err = r.db.get(ctx, &it.ID, itemInsert, it)
	} else {
		_, err = r.db.exec(ctx, itemSet, it)
	}
	if err != nil {
		return Result{}, err
	}
	r.cfg.Log.Info("retry sent to n8n", "source", key.Source, "event_id", key.EventID, "item", key.Item,
		"execution_id", t.executionID, "by", who.Name, "via", who.Via)
	x, err := r.cfg.N8N.Retry(wait, t.executionID)
	res := Result{EntryKey: key, ExecutionID: t.executionID, NewExecutionID: x.ID, N8NStatus: x.Status}
	switch {
	case errors.Is(err, audit.ErrExecutionNotFound):
		res.State, res.Message = "refused", fmt.Sprintf("pruned: n8n no longer has execution %s", t.executionID)
	case errors.Is(err, audit.ErrNotRetryable):
		res.State, res.Message = "refused", "n8n refused: "+strings.TrimPrefix(err.Error(), audit.ErrNotRetryable.Error()+": ")
	case err != nil:
		res.State, res.Message = "no_answer", "n8n did not answer the retry ("+err.Error()+"): its report settles the entry"
	case x.Status == "success":
		res.State, res.Message = "succeeded", fmt.Sprintf("n8n's retry %s of %s finished successfully", x.ID, t.executionID)
	default:
		res.State, res.Message = "failed", fmt.Sprintf("n8n's retry %s of %s ended %s", x.ID, t.executionID, x.Status)
	}
	it.State, it.Reason, it.NewExecutionID, it.N8NStatus = res.State, res.Message, x.ID, x.Status
	it.UpdatedAt = r.cfg.Now().UnixMilli()
	if _, err := r.db.exec(context.WithoutCancel(ctx), itemSet, it); err != nil {
		return res, err
	}
	return res, nil
}
