package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

// seedOverview writes two weeks of a shop's and a billing system's
// deliveries into the SQLite ledger of dataDir, as the store would have
// recorded them ending now: first deliveries, redeliveries of every class
// stopped, Retries recognised, captures after failed, unknown outcomes and
// errors resolved by a person (or still waiting), errors linked to no
// event, and alerts sent, dead and waiting. It is the same every run.
func seedOverview(t *testing.T, dataDir string) {
	t.Helper()
	end := time.Now()
	clock := audittest.NewClock(end.Add(-14 * 24 * time.Hour).Truncate(time.Hour))
	api := &lookup{execs: map[string]audit.N8NExecution{}}
	ctx := context.Background()
	store, err := store.Open(ctx, store.Options{URL: "sqlite:" + filepath.Join(dataDir, "retryaudit.db"),
		DataDir: dataDir, Now: clock.Now, Lookup: api, SQLiteSyncNormal: true, Redactor: n8n.Redactor{}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(14, 2026))

	// The steps of the history, run in the order of their times.
	type step struct {
		at time.Time
		do func() error
	}
	var steps []step
	at := func(t time.Time, do func() error) { steps = append(steps, step{t, do}) }
	exec := 4700
	next := func() string { exec++; return fmt.Sprint(exec) }
	claim := func(r audit.ClaimRequest) func() error {
		return func() error { _, err := store.Claim(ctx, r); return err }
	}
	outcome := func(source, event, execution string, o audit.Outcome, reason string) func() error {
		return func() error {
			_, err := store.ReportOutcome(ctx, audit.OutcomeRequest{Source: source, EventID: event, ExecutionID: execution,
				Outcome: o, Reason: reason})
			return err
		}
	}
	resolve := func(source, event, holder string) func() error {
		return func() error {
			_, err := store.Resolve(ctx, audit.ResolveRequest{Source: source, EventID: event, To: audit.StatusDone,
				Actor: "maria", Note: "the order is in the CRM", Holder: holder})
			return err
		}
	}
	start := clock.Now()
	for i := 0; ; i++ {
		t0 := start.Add(time.Duration(i)*50*time.Minute + time.Duration(rnd.IntN(40))*time.Minute)
		if t0.After(end.Add(-10 * time.Minute)) {
			break
		}
		source, wf, name := "shop", "orders", "Orders to CRM"
		if rnd.IntN(10) < 3 {
			source, wf, name = "billing", "invoices", "Invoices to ERP"
		}
		event := fmt.Sprintf("%s-%d", map[string]string{"shop": "order", "billing": "inv"}[source], 10400+i)
		first, delivery := next(), fmt.Sprintf("req-%d", i)
		req := audit.ClaimRequest{Source: source, EventID: event, ExecutionID: first, WorkflowID: wf, WorkflowName: name,
			DeliveryID: delivery}
		at(t0, claim(req))
		ending := rnd.IntN(100)
		// Redeliveries: n8n starting one call twice, the sender retrying,
		// an old version of the workflow still subscribed. (Not of a run
		// that fails: the sender's next delivery captures it below.)
		switch r := rnd.IntN(100); {
		case ending < 6:
		case r < 9:
			again := req
			again.ExecutionID = next()
			at(t0.Add(60*time.Millisecond), claim(again))
		case r < 20:
			again := req
			again.ExecutionID, again.DeliveryID = next(), delivery+"-retry"
			at(t0.Add(time.Duration(20+rnd.IntN(60))*time.Second), claim(again))
		case r < 25 && source == "shop":
			again := req
			again.ExecutionID, again.WorkflowID, again.WorkflowName = next(), "orders-v1", "Orders to CRM (old)"
			at(t0.Add(2*time.Second), claim(again))
		}
		// How it ended.
		done := t0.Add(time.Duration(5+rnd.IntN(50)) * time.Second)
		switch r := ending; {
		case r < 6: // failed, and the sender's next delivery captured it
			at(done, outcome(source, event, first, audit.OutcomeFailed, "CRM answered 503"))
			again := req
			again.ExecutionID, again.DeliveryID = next(), delivery+"-2"
			at(done.Add(3*time.Minute), claim(again))
			at(done.Add(3*time.Minute+20*time.Second), outcome(source, event, again.ExecutionID, audit.OutcomeDone, ""))
		case r < 10: // a person pressed Retry on a run that stopped
			retry := next()
			api.add(audit.N8NExecution{ID: retry, WorkflowID: wf, Mode: "retry", RetryOf: first})
			again := req
			again.ExecutionID, again.RetryOf = retry, first
			at(done.Add(10*time.Minute), claim(again))
			at(done.Add(10*time.Minute+15*time.Second), outcome(source, event, retry, audit.OutcomeDone, ""))
		case r < 16: // unknown: a person looks it up, 20 minutes to a day later
			at(done, outcome(source, event, first, audit.OutcomeUnknown, "CRM timed out after 30s"))
			at(done.Add(time.Duration(20+rnd.IntN(24*60))*time.Minute), resolve(source, event, first))
		case r < 19: // the run failed in the CRM node: n8n's error workflow reports it
			at(done, func() error {
				_, err := store.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + first,
					ExecutionID: first, WorkflowID: wf, WorkflowName: name, Node: "Create order", Mode: "webhook",
					Message: "ETIMEDOUT"})
				return err
			})
			at(done.Add(time.Duration(30+rnd.IntN(12*60))*time.Minute), resolve(source, event, first))
		case r < 21: // no outcome ever came
		default:
			at(done, outcome(source, event, first, audit.OutcomeDone, ""))
		}
	}
	// A stock sync that fails on its own, linked to no event, in bursts.
	for _, back := range []time.Duration{9 * 24 * time.Hour, 4 * 24 * time.Hour, 5 * time.Hour} {
		for j := range 6 {
			id := next()
			at(end.Add(-back+time.Duration(j)*7*time.Minute), func() error {
				_, err := store.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + id,
					ExecutionID: id, WorkflowID: "stock", WorkflowName: "Stock sync", Node: "HTTP Request", Mode: "trigger",
					Message: "429 Too Many Requests"})
				return err
			})
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int { return a.at.Compare(b.at) })
	for _, s := range steps {
		if s.at.After(end) {
			continue // a person has not got to it yet
		}
		if d := s.at.Sub(clock.Now()); d > 0 {
			clock.Advance(d)
		}
		if err := s.do(); err != nil {
			t.Fatalf("seed at %s: %v", s.at.Format(time.RFC3339), err)
		}
	}
	clock.Advance(end.Sub(clock.Now()))

	// Slack took the alerts but two (a channel since archived), and the
	// last six hours' wait for a paused channel.
	var rows []audit.OutboxRow
	rows, err = store.LeaseOutbox(ctx, "seed", time.Minute, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		var ok bool
		switch {
		case r.CreatedAt.After(end.Add(-6 * time.Hour)):
			ok, err = store.ReleaseOutbox(ctx, r.ID, "seed", end.Add(time.Hour))
		case r.Kind == audit.RowAlert && i%23 == 5:
			ok, err = store.FinishOutbox(ctx, r.ID, "seed", audit.Attempt{State: audit.OutboxDead, LastError: "channel_not_found"})
		default:
			ok, err = store.FinishOutbox(ctx, r.ID, "seed", audit.Attempt{State: audit.OutboxSent, Destination: "C1",
				MessageID: fmt.Sprintf("%d.%06d", end.Unix(), i)})
		}
		if err != nil || !ok {
			t.Fatalf("finish outbox row %d: %v %v", r.ID, ok, err)
		}
	}
}

// lookup is n8n's API as the seed needs it: the Retries it made.
type lookup struct {
	mu    sync.Mutex
	execs map[string]audit.N8NExecution
}

func (l *lookup) add(x audit.N8NExecution) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.execs[x.ID] = x
}

func (l *lookup) Execution(_ context.Context, id string) (audit.N8NExecution, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if x, ok := l.execs[id]; ok {
		return x, nil
	}
	return audit.N8NExecution{}, audit.ErrExecutionNotFound
}
