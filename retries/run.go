package retries

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/people"
)

// A bulk run sends the retries of a plan at a bounded rate (Rate a minute,
// at most InFlight waiting for n8n), each through the same path as a single
// retry, fenced by the version its entry had in the plan: an entry that
// moved since is skipped ("changed since the plan"). Runs and their items
// are rows (retry_runs, retry_items), so any instance reads their progress;
// the instance running one beats its heartbeat, and a run whose instance
// stopped is adopted and resumed by another (or by the same after its
// restart): its items that were being sent are marked unknown, never sent
// again; the rest go on.

// Run is a bulk run, with its items and their count by state.
type Run struct {
	ID          int64          `db:"id" json:"id"`
	CreatedBy   string         `db:"created_by" json:"created_by"`
	Via         string         `db:"via" json:"via"` // how it was started: page or api
	FilterJSON  string         `db:"filter" json:"-"`
	Filter      Filter         `db:"-" json:"filter"`
	State       string         `db:"state" json:"state"` // running, finished, cancelled
	Rate        int            `db:"rate" json:"rate_per_minute"`
	InFlight    int            `db:"in_flight" json:"in_flight"`
	Owner       string         `db:"owner" json:"-"`
	HeartbeatAt int64          `db:"heartbeat_at" json:"-"`
	CancelledBy string         `db:"cancelled_by" json:"cancelled_by,omitempty"`
	CreatedMS   int64          `db:"created_at" json:"-"`
	FinishedMS  int64          `db:"finished_at" json:"-"`
	CreatedAt   time.Time      `db:"-" json:"created_at"`
	FinishedAt  *time.Time     `db:"-" json:"finished_at,omitempty"`
	Items       []RunItem      `db:"-" json:"items,omitempty"`
	Counts      map[string]int `db:"-" json:"counts,omitempty"`
}

// RunItem is one entry of a run.
type RunItem = item

// Summary says what a run did, in a line.
func (r Run) Summary() string {
	c := r.Counts
	return fmt.Sprintf("%d retried (%d succeeded, %d failed again, %d without an answer), %d refused, %d skipped, %d cancelled, %d waiting",
		c["succeeded"]+c["failed"]+c["no_answer"]+c["unknown"], c["succeeded"], c["failed"], c["no_answer"]+c["unknown"],
		c["refused"], c["skipped"], c["cancelled"], c["planned"]+c["sending"])
}

// Done reports a run that sends nothing more.
func (r Run) Done() bool { return r.State != "running" }

// Start plans a filter and starts a run of it for who; the run goes on in
// the background (Get reads its progress).
func (r *Retrier) Start(ctx context.Context, f Filter, who Who) (Run, error) {
	if who.Name == "" || who.Via != "page" && who.Via != "api" && who.Via != "slack" {
		return Run{}, audit.FieldErrors{"via": "a run is started by a person, via page, api or slack"}.Err()
	}
	p, err := r.Plan(ctx, f)
	if err != nil {
		return Run{}, err
	}
	if p.Retries == 0 {
		return Run{}, &Refusal{Reason: ReasonNoFailed, Message: "nothing to retry: every entry the filter selects is skipped"}
	}
	filter, _ := json.Marshal(f)
	now := r.cfg.Now().UnixMilli()
	run := Run{CreatedBy: who.Name, Via: who.Via, FilterJSON: string(filter), State: "running", Rate: r.cfg.Rate, InFlight: r.cfg.InFlight,
		Owner: r.cfg.Owner, HeartbeatAt: now, CreatedMS: now}
	tx, err := r.db.x.BeginTxx(ctx, nil)
	if err != nil {
		return Run{}, &audit.Error{Code: audit.CodeUnavailable, Message: "retries: begin", Err: err}
	}
	defer tx.Rollback()
	if err := namedGet(ctx, tx, &run.ID, runInsert, run); err != nil {
		return Run{}, err
	}
	for _, e := range p.Entries {
		state, reason := "planned", ""
		if !e.Retry {
			state, reason = "skipped", e.Reason+": "+e.Message
		}
		it := item{RunID: sql.NullInt64{Int64: run.ID, Valid: true}, Source: e.Source, EventID: e.EventID, Item: e.Item,
			Version: e.Version, ExecutionID: e.ExecutionID, State: state, Reason: reason, Actor: who.Name,
			Via: who.Via, UpdatedAt: now}
		var id int64
		if err := namedGet(ctx, tx, &id, itemInsert, it); err != nil {
			return Run{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Run{}, &audit.Error{Code: audit.CodeUnavailable, Message: "retries: commit", Err: err}
	}
	r.cfg.Log.Info("bulk retry run started", "run", run.ID, "by", who.Name, "via", who.Via, "retries", p.Retries, "skipped", len(p.Entries)-p.Retries)
	r.note(ctx, who, "bulk_retry:started", f.Source, fmt.Sprintf("bulk retry run %d started: %d to retry, %d skipped; filter %s",
		run.ID, p.Retries, len(p.Entries)-p.Retries, filter))
	r.launch(run.ID)
	return r.Get(ctx, run.ID)
}

// Get reads a run with its items.
func (r *Retrier) Get(ctx context.Context, id int64) (Run, error) {
	var run Run
	err := r.db.get(ctx, &run, runRead, map[string]any{"id": id})
	if errors.Is(err, sql.ErrNoRows) {
		return run, audit.Errorf(audit.CodeNotFound, "no retry run %d", id)
	}
	if err != nil {
		return run, err
	}
	if err := r.db.list(ctx, &run.Items, itemsOfRun, map[string]any{"run_id": id}); err != nil {
		return run, err
	}
	run.fill()
	return run, nil
}

// List returns the newest runs, without their items.
func (r *Retrier) List(ctx context.Context, limit int) ([]Run, error) {
	var runs []Run
	if err := r.db.list(ctx, &runs, runList, map[string]any{"limit": limit}); err != nil {
		return nil, err
	}
	for i := range runs {
		runs[i].fill()
	}
	return runs, nil
}

func (run *Run) fill() {
	_ = json.Unmarshal([]byte(run.FilterJSON), &run.Filter)
	run.CreatedAt = time.UnixMilli(run.CreatedMS).UTC()
	if run.FinishedMS > 0 {
		t := time.UnixMilli(run.FinishedMS).UTC()
		run.FinishedAt = &t
	}
	run.Counts = map[string]int{}
	for _, it := range run.Items {
		run.Counts[it.State]++
	}
}

// Cancel stops a running run: what is being sent finishes, the rest is
// not sent.
func (r *Retrier) Cancel(ctx context.Context, id int64, who Who) (Run, error) {
	run, err := r.Get(ctx, id)
	if err != nil {
		return run, err
	}
	n, err := r.db.exec(ctx, runCancel, map[string]any{"id": id, "who": who.Name, "now": r.cfg.Now().UnixMilli()})
	if err != nil {
		return run, err
	}
	if n == 0 {
		return run, &audit.Error{Code: audit.CodeConflict, Message: fmt.Sprintf("retry run %d is %s already", id, run.State)}
	}
	if _, err := r.db.exec(ctx, itemsCancel, map[string]any{"run_id": id, "now": r.cfg.Now().UnixMilli()}); err != nil {
		return run, err
	}
	r.cfg.Log.Info("bulk retry run cancelled", "run", id, "by", who.Name)
	run, err = r.Get(ctx, id)
	if err == nil {
		r.note(ctx, who, "bulk_retry:cancelled", run.Filter.Source, fmt.Sprintf("bulk retry run %d cancelled: %s", id, run.Summary()))
	}
	return run, err
}

// note writes a run's start or cancel in the log of who did what (each
// retry is a line of its entry's history). The run stands whatever the
// log answers: a failure is logged.
func (r *Retrier) note(ctx context.Context, who Who, action, source, detail string) {
	if err := people.Note(context.WithoutCancel(ctx), r.cfg.Store, people.Action{Actor: who.Name, Via: who.Via,
		Action: action, Source: source, Detail: detail}); err != nil {
		r.cfg.Log.Warn("write a bulk retry run in the audit log", "action", action, "err", err)
	}
}

// Resume adopts the runs whose instance stopped beating (this one before
// a restart, or another) and runs them here; Watch calls it every minute.
func (r *Retrier) Resume(ctx context.Context) error {
	now := r.cfg.Now()
	var orphans []struct {
		ID          int64 `db:"id"`
		HeartbeatAt int64 `db:"heartbeat_at"`
	}
	if err := r.db.list(ctx, &orphans, runOrphans, map[string]any{"stale": now.Add(-staleAfter).UnixMilli()}); err != nil {
		return err
	}
	for _, o := range orphans {
		r.mu.Lock()
		mine := r.runs[o.ID]
		r.mu.Unlock()
		if mine {
			continue // this instance runs it: slow, not stopped
		}
		n, err := r.db.exec(ctx, runAdopt, map[string]any{"id": o.ID, "owner": r.cfg.Owner, "now": now.UnixMilli(),
			"seen": o.HeartbeatAt})
		if err != nil {
			return err
		}
		if n == 0 {
			continue // another instance adopted it
		}
		arg := map[string]any{"run_id": o.ID, "now": now.UnixMilli()}
		if _, err := r.db.exec(ctx, itemsInterrupted, arg); err != nil {
			return err
		}
		// Taken but not sent: its owner can no longer send it (itemClaim).
		if _, err := r.db.exec(ctx, itemsUntaken, arg); err != nil {
			return err
		}
		r.cfg.Log.Warn("bulk retry run resumed: its instance stopped", "run", o.ID)
		r.launch(o.ID)
	}
	return nil
}

// staleAfter: a run whose heartbeat is older was left by its instance.
// Well above n8n's RetryTimeout (2 minutes), though the heartbeat beats
// from its own ticker every beatEvery, whatever the sends wait for.
const (
	staleAfter = 5 * time.Minute
	beatEvery  = 30 * time.Second
)

// Watch resumes left runs now and every 30 seconds until ctx ends, then
// waits for the runs it started to stop.
func (r *Retrier) Watch(ctx context.Context) {
	// The runs live until ctx ends, those started before Watch too.
	defer context.AfterFunc(ctx, r.stop)()
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		if err := r.Resume(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("resume bulk retry runs", "err", err)
		}
		select {
		case <-ctx.Done():
			r.stop()
			r.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// launch runs a run in the background, once per instance.
func (r *Retrier) launch(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs[id] {
		return
	}
	r.runs[id] = true
	ctx := r.base
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.runs, id)
			r.mu.Unlock()
		}()
		if err := r.work(ctx, id); err != nil && ctx.Err() == nil {
			r.cfg.Log.Error("bulk retry run", "run", id, "err", err)
		}
	}()
}

// work sends a run's planned items, one every minute/Rate, at most
// InFlight at once, until none is left, the run is cancelled or ctx ends
// (the heartbeat stops: an instance adopts it after staleAfter).
func (r *Retrier) work(ctx context.Context, id int64) error {
	run, err := r.Get(ctx, id)
	if err != nil {
		return err
	}
	every := time.Minute / time.Duration(max(run.Rate, 1))
	slots := make(chan struct{}, max(run.InFlight, 1))
	who := Who{Name: run.CreatedBy, Via: run.Via}
	defer func() {
		for range cap(slots) {
			slots <- struct{}{} // wait for the retries in flight
		}
	}()
	// The heartbeat beats on its own: a send waiting for n8n does not
	// make the run look left.
	beat, stopBeat := context.WithCancel(ctx)
	defer stopBeat()
	go func() {
		t := time.NewTicker(beatEvery)
		defer t.Stop()
		for {
			select {
			case <-beat.Done():
				return
			case <-t.C:
				if _, err := r.beat(beat, id); err != nil && beat.Err() == nil {
					r.cfg.Log.Warn("bulk retry run heartbeat", "run", id, "err", err)
				}
			}
		}
	}()
	next := time.Now()
	for {
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		// The slot first, then the run's state, then the item: a cancel
		// that came while waiting for the slot is seen before anything is
		// taken.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		n, err := r.beat(ctx, id)
		if err != nil || n == 0 {
			<-slots
			return err // n == 0: cancelled, or adopted by another instance
		}
		var it item
		err = r.db.get(ctx, &it, itemNext, map[string]any{"run_id": id})
		if errors.Is(err, sql.ErrNoRows) {
			<-slots
			for range cap(slots) {
				slots <- struct{}{}
			}
			for range cap(slots) {
				<-slots
			}
			_, err = r.db.exec(ctx, runFinish, map[string]any{"id": id, "now": r.cfg.Now().UnixMilli()})
			r.cfg.Log.Info("bulk retry run finished", "run", id)
			return err
		}
		if err != nil {
			<-slots
			return err
		}
		if n, err := r.db.exec(ctx, itemTake, map[string]any{"id": it.ID, "now": r.cfg.Now().UnixMilli()}); err != nil || n == 0 {
			<-slots
			if err != nil {
				return err
			}
			continue
		}
		next = time.Now().Add(every)
		go func(it item) {
			defer func() { <-slots }()
			r.sendItem(ctx, it, who)
		}(it)
	}
}

// beat renews a run's heartbeat if it still runs here; 0: it does not.
func (r *Retrier) beat(ctx context.Context, id int64) (int64, error) {
	return r.db.exec(ctx, runHeartbeat, map[string]any{"id": id, "owner": r.cfg.Owner, "now": r.cfg.Now().UnixMilli()})
}

// sendItem sends one item of a run through the single retry's path and
// records why one was not sent.
func (r *Retrier) sendItem(ctx context.Context, it item, who Who) {
	key := audit.EntryKey{Source: it.Source, EventID: it.EventID, Item: it.Item}
	// At shutdown the wait for n8n ends: the item is recorded not answered
	// (the Retry's report still settles the entry) and never sent again.
	sent, err := r.prepare(ctx, key, it.Version, who, it.RunID.Int64, it.ID)
	if err == nil {
		_, err = r.ask(ctx, ctx, sent)
		if err != nil {
			r.cfg.Log.Error("record a bulk retry's answer", "run", it.RunID.Int64, "err", err)
		}
		return
	}
	if errors.Is(err, errNotSent) {
		return
	}
	it.State, it.Reason, it.UpdatedAt = "refused", err.Error(), r.cfg.Now().UnixMilli()
	if rf, ok := err.(*Refusal); ok {
		it.Reason = rf.Reason + ": " + rf.Message
		if rf.Reason == ReasonChanged {
			it.Reason = "changed since the plan: " + rf.Message
		}
	}
	if _, err := r.db.exec(context.WithoutCancel(ctx), itemSet, it); err != nil {
		r.cfg.Log.Error("record a bulk retry's refusal", "run", it.RunID.Int64, "err", err)
	}
}

// Prune forgets the retries settled before a time and the ended runs left
// without items (the events' retention: their history keeps each retry's
// line as long as the event).
func (r *Retrier) Prune(ctx context.Context, before time.Time) (int64, error) {
	arg := map[string]any{"before": before.UnixMilli()}
	n, err := r.db.exec(ctx, itemsPrune, arg)
	if err != nil {
		return n, err
	}
	_, err = r.db.exec(ctx, runsPrune, arg)
	return n, err
}
