package retries

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// Filter selects the entries of a bulk retry: the events named, or those
// of a source, a workflow (the holder's) and a time range (when the event
// was first seen, from included, to excluded). At least one is given.
type Filter struct {
	Source   string     `json:"source,omitempty"`
	Workflow string     `json:"workflow,omitempty"`
	From     *time.Time `json:"from,omitempty"`
	To       *time.Time `json:"to,omitempty"`
	Events   []Ref      `json:"events,omitempty"`
}

// Ref names an entry, and the version it was seen at (0: as it is).
type Ref struct {
	Source  string `db:"source" json:"source"`
	EventID string `db:"event_id" json:"event_id"`
	Item    string `db:"item" json:"item,omitempty"`
	Version int64  `db:"version" json:"version,omitempty"`
}

// MaxPlan bounds the entries one plan (and run) holds.
const MaxPlan = 1000

// Validate names every bad field.
func (f Filter) Validate() error {
	e := audit.FieldErrors{}
	if f.Source == "" && f.Workflow == "" && f.From == nil && f.To == nil && len(f.Events) == 0 {
		e.Add("filter", "give at least one of source, workflow, from, to or events: a bulk retry of everything is not offered")
	}
	if len(f.Source) > audit.MaxSourceLen {
		e.Add("source", fmt.Sprintf("longer than %d characters", audit.MaxSourceLen))
	}
	if len(f.Workflow) > audit.MaxIDLen {
		e.Add("workflow", fmt.Sprintf("longer than %d characters", audit.MaxIDLen))
	}
	if f.From != nil && f.To != nil && !f.From.Before(*f.To) {
		e.Add("to", "must be after from")
	}
	if len(f.Events) > 0 && (f.Source != "" || f.Workflow != "" || f.From != nil || f.To != nil) {
		e.Add("events", "give either a list of events or source/workflow/from/to, not both")
	}
	if len(f.Events) > MaxPlan {
		e.Add("events", fmt.Sprintf("at most %d in one run", MaxPlan))
	}
	for i, r := range f.Events {
		switch {
		case r.Source == "" || len(r.Source) > audit.MaxSourceLen:
			e.Add(fmt.Sprintf("events[%d].source", i), "required, at most 100 characters")
		case r.EventID == "" || len(r.EventID) > audit.MaxEventIDLen:
			e.Add(fmt.Sprintf("events[%d].event_id", i), fmt.Sprintf("required, at most %d characters", audit.MaxEventIDLen))
		case len(r.Item) > audit.MaxItemLen:
			e.Add(fmt.Sprintf("events[%d].item", i), "too long")
		case r.Version < 0:
			e.Add(fmt.Sprintf("events[%d].version", i), "must not be negative")
		}
	}
	return e.Err()
}

// Planned is one entry of a plan: retried, or skipped and why.
type Planned struct {
	Ref
	Status      audit.Status `json:"status,omitempty"`
	Retry       bool         `json:"retry"`
	ExecutionID string       `json:"execution_id,omitempty"`
	Reason      string       `json:"reason,omitempty"` // why it is skipped (a Reason constant, or the status)
	Message     string       `json:"message,omitempty"`
}

// Plan is what a bulk retry would do, entry by entry, and the count of
// the done entries its filter also selects (not listed: they happened).
type Plan struct {
	Filter  Filter         `json:"filter"`
	Entries []Planned      `json:"entries"`
	Retries int            `json:"retries"`
	Skipped map[string]int `json:"skipped"`
	Done    int            `json:"done_not_listed"`
}

// Plan says what a bulk retry of a filter would do, sending nothing: it
// asks n8n about each failed entry's execution.
func (r *Retrier) Plan(ctx context.Context, f Filter) (Plan, error) {
	if err := f.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Filter: f, Skipped: map[string]int{}, Entries: []Planned{}}
	refs, done, err := r.candidates(ctx, f)
	if err != nil {
		return p, err
	}
	p.Done = done
	for _, ref := range refs {
		for _, e := range r.expand(ctx, ref) {
			p.Entries = append(p.Entries, e)
			if len(p.Entries) > MaxPlan {
				return p, audit.FieldErrors{"filter": fmt.Sprintf("it selects more than %d entries: narrow it", MaxPlan)}.Err()
			}
		}
	}
	// n8n is asked about each entry, a few at a time, within PlanFor: a
	// preview that runs out says so and a run is not started from it.
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PlanFor)
	defer cancel()
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		errs  = make([]error, len(p.Entries))
		asked atomic.Int64
	)
	for range planWorkers {
		wg.Go(func() {
			for i := range next {
				e := &p.Entries[i]
				t, err := r.check(pctx, audit.EntryKey{Source: e.Source, EventID: e.EventID, Item: e.Item}, e.Version, 0)
				e.Status, e.Version, e.ExecutionID, errs[i] = t.status, t.version, t.executionID, err
				asked.Add(1)
			}
		})
	}
feed:
	for i := range p.Entries {
		if p.Entries[i].Reason != "" {
			continue
		}
		select {
		case next <- i:
		case <-pctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if pctx.Err() != nil && ctx.Err() == nil {
		return p, &Refusal{Reason: ReasonTimeout, Message: fmt.Sprintf("the preview ran out of time (%s) asking n8n "+
			"about %d entries (%d answered): n8n is slow or unreachable; narrow the filter or try again; nothing was "+
			"started", r.cfg.PlanFor, len(p.Entries), asked.Load())}
	}
	for i := range p.Entries {
		e := &p.Entries[i]
		if e.Reason != "" {
			p.Skipped[e.Reason]++
			continue
		}
		err := errs[i]
		if rf, ok := err.(*Refusal); ok {
			e.Reason, e.Message = rf.Reason, rf.Message
			if rf.Reason == ReasonNotFailed {
				e.Reason = string(rf.Status)
			}
			p.Skipped[e.Reason]++
			continue
		}
		if err != nil {
			return p, err
		}
		e.Retry = true
		p.Retries++
	}
	return p, nil
}

// planWorkers is how many entries a preview asks n8n about at once.
const planWorkers = 4

// candidates are the events a filter names, or selects (not done), and
// the count of the done ones it selects.
func (r *Retrier) candidates(ctx context.Context, f Filter) ([]Ref, int, error) {
	if len(f.Events) > 0 {
		return f.Events, 0, nil
	}
	from, to := time.Unix(0, 0), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if f.From != nil {
		from = *f.From
	}
	if f.To != nil {
		to = *f.To
	}
	arg := map[string]any{"source": f.Source, "workflow": f.Workflow, "from": r.cfg.Store.Time(from),
		"to": r.cfg.Store.Time(to), "limit": MaxPlan + 1}
	var refs []Ref
	if err := r.db.list(ctx, &refs, eventsOfFilter, arg); err != nil {
		return nil, 0, err
	}
	if len(refs) > MaxPlan {
		return nil, 0, audit.FieldErrors{"filter": fmt.Sprintf("it selects more than %d events that are not done: narrow it",
			MaxPlan)}.Err()
	}
	var done int
	if err := r.db.get(ctx, &done, doneOfFilter, arg); err != nil {
		return nil, 0, err
	}
	return refs, done, nil
}

// expand turns an event with items into its items (an event named without
// its item, which has items).
func (r *Retrier) expand(ctx context.Context, ref Ref) []Planned {
	if ref.Item != "" {
		return []Planned{{Ref: ref}}
	}
	d, err := r.cfg.Store.Event(ctx, ref.Source, ref.EventID)
	if err != nil || d.ItemCount == 0 {
		return []Planned{{Ref: ref}}
	}
	var out []Planned
	for _, it := range d.Items {
		out = append(out, Planned{Ref: Ref{Source: ref.Source, EventID: ref.EventID, Item: it.Item}})
	}
	return out
}
