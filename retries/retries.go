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
	"github.com/retryaudit/retryaudit/metrics"
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
	// PlanFor bounds a preview's (and a run's plan's) questions to n8n:
	// 30 seconds by default.
	PlanFor time.Duration
	// AnswerWithin is how long a single retry waits for n8n's answer before
	// it answers "sent, waiting for its report": 45 seconds by default,
	// below the server's write timeout (60 s).
	AnswerWithin time.Duration
	Metrics      *metrics.Metrics // counts the retries by n8n's answer; nil for none
	Log          *slog.Logger
	Now          func() time.Time
}

// Retrier sends retries and runs bulk runs.
type Retrier struct {
	cfg  Config
	db   db
	wg   sync.WaitGroup
	mu   sync.Mutex
	runs map[int64]bool  // the runs this instance is running
	base context.Context // the runs' context: ended by Close, or Watch's end
	stop context.CancelFunc
}

// New returns a Retrier; Start runs (and adopts) bulk runs.
func New(cfg Config) *Retrier {
	cfg.Rate = cmp.Or(cfg.Rate, 30)
	cfg.InFlight = cmp.Or(cfg.InFlight, 2)
	cfg.PendingFor = cmp.Or(cfg.PendingFor, 10*time.Minute)
	cfg.PlanFor = cmp.Or(cfg.PlanFor, 30*time.Second)
	cfg.AnswerWithin = cmp.Or(cfg.AnswerWithin, 45*time.Second)
	cfg.Owner = cmp.Or(cfg.Owner, "retryaudit")
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	base, stop := context.WithCancel(context.Background())
	return &Retrier{cfg: cfg, db: db{cfg.Store.DB()}, runs: map[int64]bool{}, base: base, stop: stop}
}

// Close stops the runs this instance runs (their retries in flight are
// recorded not answered; another instance resumes the rest) and waits for
// them and for the single retries still waiting for n8n.
func (r *Retrier) Close() {
	r.stop()
	r.wg.Wait()
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
	ReasonTimeout   = "n8n_timeout" // a preview ran out of time asking n8n
	ReasonNotFailed = "not_failed"  // processing, done or cancelled: the status says which
)

func (e *Refusal) Error() string { return "retries: " + e.Message }

// Code is the domain code of a refusal, for the handlers' statuses.
func (e *Refusal) Code() audit.Code {
	switch e.Reason {
	case ReasonNotFound:
		return audit.CodeNotFound
	case ReasonItems:
		return audit.CodeInvalid
	case ReasonNoAPI, ReasonTimeout:
		return audit.CodeUnavailable
	}
	return audit.CodeConflict
}

// One asks n8n to retry an entry's failed execution for a person, fenced
// by the entry's version the person saw: the entry must be failed, as seen,
// with no retry waiting for its outcome, and n8n must still have the failed
// execution. The request is written in the ledger first, then n8n is asked;
// One returns once n8n's Retry has finished, or n8n did not answer in time,
// or after AnswerWithin with the state "sending" (the send goes on). A
// refusal is a *Refusal; nothing was sent.
func (r *Retrier) One(ctx context.Context, key audit.EntryKey, version int64, who Who) (Result, error) {
	if err := (audit.RetryRequest{Source: key.Source, EventID: key.EventID, Item: key.Item, Version: version,
		Actor: who.Name, Via: who.Via, ExecutionID: "x"}).Validate(); err != nil {
		return Result{}, err
	}
	it, err := r.prepare(ctx, key, version, who, 0, 0)
	if err != nil {
		return Result{}, err
	}
	// The person waits for n8n's answer, up to AnswerWithin (a closed page
	// does not cut it); then the send goes on in the background, its
	// answer recorded as a run's is.
	done := make(chan error, 1)
	var res Result
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		var err error
		res, err = r.ask(ctx, context.WithoutCancel(ctx), it)
		if err != nil {
			r.cfg.Log.Error("record a retry's answer", "source", key.Source, "event_id", key.EventID, "err", err)
		}
		done <- err
	}()
	t := time.NewTimer(r.cfg.AnswerWithin)
	defer t.Stop()
	select {
	case err := <-done:
		return res, err
	case <-t.C:
		return Result{EntryKey: key, State: "sending", ExecutionID: it.ExecutionID,
			Message: "sent to n8n, waiting for its report: n8n has not answered yet; the Retry's report settles the entry"}, nil
	}
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
// which n8n must say failed. self is the run's item being sent (0: none),
// not a pending retry of its own.
func (r *Retrier) check(ctx context.Context, key audit.EntryKey, version, self int64) (target, error) {
	d, err := r.cfg.Store.Event(ctx, key.Source, key.EventID)
	if audit.ErrorCode(err) == audit.CodeNotFound {
		return target{}, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf("no event %s/%s", key.Source, key.EventID)}
	}
	if err != nil {
		return target{}, err
	}
	t := target{version: d.Version, status: d.Status, executionID: d.Holder}
	switch {
	case key.Item == "" && d.ItemCount > 0:
		return t, &Refusal{Reason: ReasonItems, Status: d.Status, Version: d.Version,
			Message: "this event was claimed with items: retry one item"}
	case key.Item != "":
		i := slices.IndexFunc(d.Items, func(it audit.Entry) bool { return it.Item == key.Item })
		if i < 0 {
			return t, &Refusal{Reason: ReasonNotFound, Message: fmt.Sprintf("no item %q in event %s/%s", key.Item,
				key.Source, key.EventID)}
		}
		it := d.Items[i]
		t = target{version: it.Version, status: it.Status, executionID: it.Holder}
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
	if p, ok, err := r.pending(ctx, key, t.version, self); err != nil {
		return t, err
	} else if ok && p.State == "unknown" {
		return refuse(ReasonPending, "a retry was sent at %s by %s (via %s) and its fate is unknown (the instance "+
			"sending it stopped): it may still be running in n8n; another waits until a person settles the entry or "+
			"the Retry reports", time.UnixMilli(p.SentAt).UTC().Format(time.RFC3339), p.Actor, p.Via)
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
			at = x.FirstSeen
		}
	}
	for _, x := range xs {
		if root != "" && cmp.Or(x.Root, x.ID) == root && x.Mode == "retry" && !x.FirstSeen.Before(at) {
			newest, at = x.ID, x.FirstSeen
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

// pending returns an entry's retry that waits for its outcome, other than
// self: sent (or not answered by n8n) within PendingFor, or of unknown
// fate, with the entry not moved since.
func (r *Retrier) pending(ctx context.Context, key audit.EntryKey, version, self int64) (item, bool, error) {
	var it item
	err := r.db.get(ctx, &it, itemPending, map[string]any{"source": key.Source, "event_id": key.EventID,
		"item": key.Item, "id": self})
	if errors.Is(err, sql.ErrNoRows) {
		return it, false, nil
	}
	if err != nil {
		return it, false, err
	}
	recent := r.cfg.Now().Sub(time.UnixMilli(it.SentAt)) < r.cfg.PendingFor
	return it, (recent || it.State == "unknown") && it.Version == version, nil
}

// errNotSent: a run's item was not sent because its run was cancelled or
// taken over first; the item is settled already.
var errNotSent = errors.New("retries: the run stopped before the item was sent")

// prepare checks an entry, records the retry as pending (refused when
// another is) and writes the request in the ledger: the item is ready for
// n8n (ask). run and itemID are the run and its item being sent (0: a
// single retry).
func (r *Retrier) prepare(ctx context.Context, key audit.EntryKey, version int64, who Who, run, itemID int64) (item, error) {
	t, err := r.check(ctx, key, version, itemID)
	if err != nil {
		return item{}, err
	}
	now := r.cfg.Now()
	it := item{ID: itemID, Source: key.Source, EventID: key.EventID, Item: key.Item, Version: t.version + 1,
		ExecutionID: t.executionID, State: "sending", Actor: who.Name, Via: who.Via, SentAt: now.UnixMilli(),
		UpdatedAt: now.UnixMilli()}
	// The item is pending before the ledger line is written, so that a
	// retry checked in between finds it.
	if err := r.claim(ctx, &it, now); err != nil {
		return item{}, err
	}
	err = r.cfg.Store.Retry(ctx, audit.RetryRequest{Source: key.Source, EventID: key.EventID, Item: key.Item,
		Version: t.version, Actor: who.Name, Via: who.Via, ExecutionID: t.executionID, Run: run})
	if err != nil {
		if itemID == 0 {
			if _, derr := r.db.exec(context.WithoutCancel(ctx), itemDrop, it); derr != nil {
				r.cfg.Log.Error("forget a retry the ledger refused", "err", derr)
			}
		}
		var ae *audit.Error
		if errors.As(err, &ae) && ae.Code == audit.CodeConflict {
			return item{}, &Refusal{Reason: ReasonChanged, Status: ae.Status, Message: ae.Message}
		}
		return item{}, err
	}
	if itemID != 0 {
		// The last word before n8n: the run still runs here.
		n, err := r.db.exec(ctx, itemConfirm, r.itemArg(it, now))
		if err != nil {
			return item{}, err
		}
		if n == 0 {
			r.unsent(ctx, it)
			return item{}, errNotSent
		}
	}
	r.cfg.Log.Info("retry sent to n8n", "source", key.Source, "event_id", key.EventID, "item", key.Item,
		"execution_id", t.executionID, "by", who.Name, "via", who.Via)
	return it, nil
}

// claim records a retry as pending: a single retry's row inserted, a run's
// item marked sent, both refused when another retry of the entry is
// pending (and a run's item when its run stopped running here).
func (r *Retrier) claim(ctx context.Context, it *item, now time.Time) error {
	arg := r.itemArg(*it, now)
	if it.ID == 0 {
		err := r.db.get(ctx, &it.ID, itemInsertPending, arg)
		if errors.Is(err, sql.ErrNoRows) {
			return &Refusal{Reason: ReasonPending, Version: it.Version - 1,
				Message: "another retry of this entry was sent just now, waiting for its outcome"}
		}
		return err
	}
	n, err := r.db.exec(ctx, itemClaim, arg)
	if err != nil || n > 0 {
		return err
	}
	if p, ok, perr := r.pending(ctx, it.EntryKey(), it.Version-1, it.ID); perr == nil && ok {
		return &Refusal{Reason: ReasonPending, Version: it.Version - 1,
			Message: fmt.Sprintf("a retry was sent at %s by %s (via %s), waiting for its outcome",
				time.UnixMilli(p.SentAt).UTC().Format(time.RFC3339), p.Actor, p.Via)}
	}
	r.unsent(ctx, *it)
	return errNotSent
}

// unsent settles a run's item its run stopped sending.
func (r *Retrier) unsent(ctx context.Context, it item) {
	if _, err := r.db.exec(context.WithoutCancel(ctx), itemUnsent, map[string]any{"id": it.ID,
		"now": r.cfg.Now().UnixMilli()}); err != nil {
		r.cfg.Log.Error("settle a bulk retry not sent", "err", err)
	}
}

func (r *Retrier) itemArg(it item, now time.Time) map[string]any {
	return map[string]any{"id": it.ID, "source": it.Source, "event_id": it.EventID, "item": it.Item,
		"version": it.Version, "execution_id": it.ExecutionID, "actor": it.Actor, "via": it.Via,
		"sent_at": it.SentAt, "updated_at": it.UpdatedAt, "owner": r.cfg.Owner,
		"recent": now.Add(-r.cfg.PendingFor).UnixMilli()}
}

// EntryKey is the entry an item retries.
func (it item) EntryKey() audit.EntryKey {
	return audit.EntryKey{Source: it.Source, EventID: it.EventID, Item: it.Item}
}

// ask asks n8n to retry a recorded item's execution and records its answer.
func (r *Retrier) ask(ctx, wait context.Context, it item) (Result, error) {
	key := it.EntryKey()
	x, err := r.cfg.N8N.Retry(wait, it.ExecutionID)
	res := Result{EntryKey: key, ExecutionID: it.ExecutionID, NewExecutionID: x.ID, N8NStatus: x.Status}
	switch {
	case errors.Is(err, audit.ErrExecutionNotFound):
		res.State, res.Message = "refused", fmt.Sprintf("pruned: n8n no longer has execution %s", it.ExecutionID)
	case errors.Is(err, audit.ErrNotRetryable):
		res.State, res.Message = "refused", "n8n refused: "+strings.TrimPrefix(err.Error(), audit.ErrNotRetryable.Error()+": ")
	case err != nil:
		res.State, res.Message = "no_answer", "n8n did not answer the retry ("+err.Error()+"): its report settles the entry"
	case x.Status == "success":
		res.State, res.Message = "succeeded", fmt.Sprintf("n8n's retry %s of %s finished successfully", x.ID, it.ExecutionID)
	default:
		res.State, res.Message = "failed", fmt.Sprintf("n8n's retry %s of %s ended %s", x.ID, it.ExecutionID, x.Status)
	}
	r.cfg.Metrics.Retried(res.State)
	it.State, it.Reason, it.NewExecutionID, it.N8NStatus = res.State, res.Message, x.ID, x.Status
	it.UpdatedAt = r.cfg.Now().UnixMilli()
	if _, err := r.db.exec(context.WithoutCancel(ctx), itemSet, it); err != nil {
		return res, err
	}
	return res, nil
}
