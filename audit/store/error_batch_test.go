package store_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestErrorPayloadsAtOnce: error payloads posted all at once go through the
// group commit and leave what they leave one by one: one row per payload
// (copies answered as duplicates), every error of an execution that claimed
// an event linked to it and the event in review, whether the claim came
// before the error or at the same moment, and the same alerts.
func TestErrorPayloadsAtOnce(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		batched := audittest.Open(t, dialect, store.Options{})
		alone := audittest.Open(t, dialect, store.Options{Batching: store.Batching{Off: true}})
		const events, copies = 12, 3
		errorOf := func(exec string) audit.N8NErrorReport {
			return audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + exec, ExecutionID: exec,
				WorkflowID: "wf", Node: "Create order", Message: "the CRM timed out"}
		}
		claimOf := func(i int, exec string) audit.ClaimRequest {
			return audit.ClaimRequest{Source: "shop", EventID: fmt.Sprintf("e%d", i), ExecutionID: exec, WorkflowID: "wf"}
		}
		// Events claimed before (c…), claimed at the same moment as their
		// errors (m…), and errors of executions that claim nothing (u…).
		for _, s := range []*store.Store{batched, alone} {
			for i := 0; i < events; i++ {
				if _, err := s.Claim(ctx, claimOf(i, fmt.Sprintf("c%d", i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		var reports []audit.N8NErrorReport
		for i := 0; i < events; i++ {
			for c := 0; c < copies; c++ {
				reports = append(reports, errorOf(fmt.Sprintf("c%d", i)), errorOf(fmt.Sprintf("m%d", i)),
					errorOf(fmt.Sprintf("u%d", i)))
			}
		}

		type answer struct {
			res audit.N8NErrorResult
			err error
		}
		answers := make([]answer, len(reports))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, r := range reports {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := batched.RecordError(ctx, r)
				answers[i] = answer{res, err}
			}()
		}
		for i := 0; i < events; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := batched.Claim(ctx, claimOf(events+i, fmt.Sprintf("m%d", i))); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, r := range reports {
			if _, err := alone.RecordError(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < events; i++ {
			if _, err := alone.Claim(ctx, claimOf(events+i, fmt.Sprintf("m%d", i))); err != nil {
				t.Fatal(err)
			}
		}

		recorded := map[string]int{}
		for i, a := range answers {
			if a.err != nil {
				t.Fatalf("payload %d: %v", i, a.err)
			}
			if !a.res.Duplicate {
				recorded[reports[i].DedupeKey]++
			}
		}
		for _, r := range reports {
			if n := recorded[r.DedupeKey]; n != 1 {
				t.Errorf("%s recorded %d times, want once, the copies answered duplicate", r.DedupeKey, n)
			}
		}
		for name, s := range map[string]*store.Store{"group commit": batched, "one by one": alone} {
			list, _, err := s.Errors(ctx, audit.N8NErrorFilter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if want := 3 * events; len(list) != want {
				t.Errorf("%s: %d errors, want %d", name, len(list), want)
			}
			for i := 0; i < 2*events; i++ {
				d, err := s.Event(ctx, "shop", fmt.Sprintf("e%d", i))
				if err != nil {
					t.Fatal(err)
				}
				if !d.NeedsReview {
					t.Errorf("%s: e%d (%s) does not wait for review after its execution's error", name, i, d.Status)
				}
			}
		}
		for _, q := range []string{
			"SELECT count(*) FROM outbox",
			"SELECT count(*) FROM n8n_errors WHERE source IS NOT NULL",
			"SELECT count(*) FROM event_history WHERE kind <> 'claim'",
		} {
			var a, b int
			if err := batched.DB().Get(&a, q); err != nil {
				t.Fatal(err)
			}
			if err := alone.DB().Get(&b, q); err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Errorf("%s: group commit %d, one by one %d", q, a, b)
			}
		}
	})
}

// TestErrorRoundsRecordWhatOneByOneRecords: a batch of error payloads,
// most of them plain (their execution claimed events and holds them,
// finished them, or was alerted about them; several events for one; an
// entry nobody holds), some not (an execution that does not hold its entry,
// one that touched no event, one the service never saw), with copies, leaves
// exactly what the same payloads leave one by one, in the same order: the
// same answers, errors, links, reviews, history lines, executions, alerts
// and counters.
func TestErrorRoundsRecordWhatOneByOneRecords(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
		batched := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		alone := audittest.Open(t, dialect, store.Options{Now: clock.Now, Batching: store.Batching{Off: true}})
		reports := seedErrorLedgers(t, clock, batched, alone)
		got, errs := batched.RecordErrorsTogether(ctx, reports)
		for i, r := range reports {
			if errs[i] != nil {
				t.Fatalf("payload %d (%s): %v", i, r.DedupeKey, errs[i])
			}
			want, err := alone.RecordError(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := answer(t, batched, got[i]), answer(t, alone, want); a != b {
				t.Errorf("payload %d (%s): group commit answered %s, one by one %s", i, r.DedupeKey, a, b)
			}
		}
		compareLedgers(t, batched, alone, ledgerDump)
	})
}

// TestErrorsAloneWriteAsTheRound records the same payloads on two ledgers:
// on one each goes in a round (plainErrors), on the other alone, because
// n8n's API answers for every execution there (with what the payloads say).
// Both must leave the same errors, links, history lines, reviews, alerts
// and counters: the errors a report alone links write what a round's do.
func TestErrorsAloneWriteAsTheRound(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
		round := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		alone := audittest.Open(t, dialect, store.Options{Now: clock.Now, Lookup: retryOf{}})
		reports := seedErrorLedgers(t, clock, round, alone)
		for i, r := range reports {
			a, err := round.RecordError(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			b, err := alone.RecordError(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := answer(t, round, a), answer(t, alone, b); a != b {
				t.Errorf("payload %d (%s): in a round %s, alone %s", i, r.DedupeKey, a, b)
			}
		}
		if n := len(dump(t, alone, `SELECT 1 FROM event_history WHERE kind = 'error'`)); n == 0 {
			t.Fatal("no payload linked an error to an event")
		}
		// The executions, and the claims' history lines, differ: n8n's API
		// was asked of one ledger's, and the claims' lines say so.
		compareLedgers(t, round, alone, []string{ledgerDump[0], ledgerDump[2], ledgerDump[3], ledgerDump[5], ledgerDump[6],
			`SELECT h.source, h.event_id, h.at, h.execution_id, h.retry_of, h.workflow_id, h.workflow_name, h.node,
			h.decision, h.message, e.dedupe_key FROM event_history h JOIN n8n_errors e ON e.id = h.error_id
			ORDER BY h.source, h.event_id, h.id`})
	})
}

// seedErrorLedgers writes the same entries on each store, and returns
// payloads about them: many plain (of an execution that finished its event,
// holds it, was alerted about it, touched two events, holds an entry nobody
// else does), some not (an execution that does not hold its entry, one that
// touched no event, one the service never saw), with copies.
func seedErrorLedgers(t *testing.T, clock *audittest.Clock, stores ...*store.Store) []audit.N8NErrorReport {
	t.Helper()
	ctx := context.Background()
	const n = 8
	for _, s := range stores {
		claim := func(event, exec string) {
			t.Helper()
			if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: exec,
				WorkflowID: "wf", WorkflowName: "Orders", Node: "Claim"}); err != nil {
				t.Fatal(err)
			}
		}
		report := func(event, exec string, o audit.Outcome) {
			t.Helper()
			if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event, ExecutionID: exec,
				WorkflowID: "wf", Outcome: o}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < n; i++ {
			claim(fmt.Sprintf("done%d", i), fmt.Sprintf("xd%d", i)) // finished: a history line
			report(fmt.Sprintf("done%d", i), fmt.Sprintf("xd%d", i), audit.OutcomeDone)
			claim(fmt.Sprintf("held%d", i), fmt.Sprintf("xh%d", i)) // held: review and an alert
			claim(fmt.Sprintf("told%d", i), fmt.Sprintf("xt%d", i)) // alerted before: a reply in the thread
			report(fmt.Sprintf("told%d", i), fmt.Sprintf("xt%d", i), audit.OutcomeUnknown)
			claim(fmt.Sprintf("a%d", i), fmt.Sprintf("xs%d", i)) // two events, one finished
			claim(fmt.Sprintf("b%d", i), fmt.Sprintf("xs%d", i))
			report(fmt.Sprintf("a%d", i), fmt.Sprintf("xs%d", i), audit.OutcomeDone)
			claim(fmt.Sprintf("other%d", i), fmt.Sprintf("xo%d", i)) // a redelivery's execution, not the holder
			claim(fmt.Sprintf("other%d", i), fmt.Sprintf("yo%d", i))
			if _, err := s.RecordHookReports(ctx, []audit.N8NHookReport{{Phase: audit.PhaseStart, // known, no event
				ExecutionID: fmt.Sprintf("xn%d", i), WorkflowID: "wf", Mode: "webhook", StartedAt: clock.Now()}}); err != nil {
				t.Fatal(err)
			}
		}
		// An entry nobody holds (written by SQL) is the error's to flag.
		if _, err := s.DB().Exec("UPDATE webhook_events SET holder_execution_id = '' WHERE event_id = 'held0'"); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	errorOf := func(exec, node string) audit.N8NErrorReport {
		return audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + exec, ExecutionID: exec,
			WorkflowID: "wf", WorkflowName: "Orders", Mode: "webhook", Node: node, Message: "the CRM timed out"}
	}
	var reports []audit.N8NErrorReport
	for i := 0; i < n; i++ { // a long run of plain payloads
		reports = append(reports, errorOf(fmt.Sprintf("xd%d", i), ""), errorOf(fmt.Sprintf("xh%d", i), "Create order"),
			errorOf(fmt.Sprintf("xt%d", i), "Create order"), errorOf(fmt.Sprintf("xs%d", i), "Create order"))
	}
	for i := 0; i < n; i++ { // copies (one fills in the node), among payloads that go alone
		reports = append(reports, errorOf(fmt.Sprintf("xd%d", i), "Create order"), errorOf(fmt.Sprintf("yo%d", i), "Create order"),
			errorOf(fmt.Sprintf("xh%d", i), "Create order"), errorOf(fmt.Sprintf("xu%d", i), "Create order"),
			errorOf(fmt.Sprintf("xs%d", i), "Create order"), errorOf(fmt.Sprintf("xo%d", i), "Create order"),
			errorOf(fmt.Sprintf("xn%d", i), "Create order"))
	}
	return reports
}

// compareLedgers fails the test where the two stores' tables differ.
func compareLedgers(t *testing.T, a, b *store.Store, queries []string) {
	t.Helper()
	for _, q := range queries {
		x, y := dump(t, a, q), dump(t, b, q)
		if !slices.Equal(x, y) {
			t.Errorf("%s\nfirst:\n%s\nsecond:\n%s", q, strings.Join(x, "\n"), strings.Join(y, "\n"))
		}
	}
}

// answer is an error's answer with the error named by its dedupe key.
func answer(t *testing.T, s *store.Store, res audit.N8NErrorResult) string {
	t.Helper()
	var key string
	if err := s.DB().Get(&key, s.DB().Rebind("SELECT dedupe_key FROM n8n_errors WHERE id = ?"), res.ID); err != nil {
		t.Fatal(err)
	}
	linked := ""
	if res.Linked != nil {
		linked = res.Linked.Source + "/" + res.Linked.EventID
	}
	return fmt.Sprintf("%s duplicate=%v kind=%s execution=%s retry_of=%s linked=%s", key, res.Duplicate, res.Kind,
		res.ExecutionID, res.RetryOf, linked)
}

// ledgerDump reads what error payloads leave, errors named by their dedupe
// key (ids differ between stores: a duplicate takes one on PostgreSQL).
var ledgerDump = []string{
	`SELECT dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id, workflow_id, workflow_name, mode,
	node, message, http_code, n8n_url, payload, payload_truncated, intake_note, source, event_id
	FROM n8n_errors ORDER BY dedupe_key`,
	`SELECT h.source, h.event_id, h.at, h.kind, h.execution_id, h.retry_of, h.workflow_id, h.workflow_name, h.node,
	h.decision, h.delivery, h.class, h.status, h.message, e.dedupe_key
	FROM event_history h LEFT JOIN n8n_errors e ON e.id = h.error_id ORDER BY h.source, h.event_id, h.id`,
	`SELECT source, event_id, status, holder_execution_id, review_reason, deliveries, updated_at, last_seen_at
	FROM webhook_events ORDER BY source, event_id`,
	`SELECT source, event_id, execution_id, role, acted FROM event_executions ORDER BY source, event_id, execution_id`,
	`SELECT execution_id, n8n_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of, root_execution_id,
	n8n_url, lineage_note, first_seen_at, last_seen_at FROM executions ORDER BY execution_id`,
	`SELECT o.thread_key, o.kind, o.alert_kind, o.state, o.last_error, o.due_at, e.dedupe_key, o.payload
	FROM outbox o LEFT JOIN n8n_errors e ON e.id = o.error_id ORDER BY o.thread_key, o.id`,
	`SELECT source, workflow_id, metric, sum(n) FROM stats_hourly GROUP BY source, workflow_id, metric
	ORDER BY source, workflow_id, metric`,
}

// errorIDField is an error's id in an alert's payload.
var errorIDField = regexp.MustCompile(`"error_id":[0-9]+`)

// dump returns a query's rows as text, an error id in a payload named by the
// error's dedupe key.
func dump(t *testing.T, s *store.Store, q string) []string {
	t.Helper()
	keys := map[string]string{}
	var ids []struct {
		ID  int64  `db:"id"`
		Key string `db:"dedupe_key"`
	}
	if err := s.DB().Select(&ids, "SELECT id, dedupe_key FROM n8n_errors"); err != nil {
		t.Fatal(err)
	}
	for _, e := range ids {
		keys[fmt.Sprintf(`"error_id":%d`, e.ID)] = `"error":"` + e.Key + `"`
	}
	rows, err := s.DB().Queryx(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		cols, err := rows.SliceScan()
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if b, ok := c.([]byte); ok {
				cols[i] = string(b)
			}
		}
		line := errorIDField.ReplaceAllStringFunc(fmt.Sprintf("%v", cols), func(m string) string { return keys[m] })
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestErrorsLinkedAloneJoinTheirEvents covers what only a report recorded
// alone, or an error its claim links, writes: a Retry's error, linked to
// the event through the execution it retries, makes the Retry part of the
// event and flags the entry its lineage holds; an error that came before
// its execution's claim is linked by the claim, and flags the entry.
func TestErrorsLinkedAloneJoinTheirEvents(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{Lookup: retryOf{"r2", "h1"}})
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "retried", ExecutionID: "h1"}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []audit.N8NErrorReport{
			{Kind: audit.N8NErrorExecution, DedupeKey: "exec:r2", ExecutionID: "r2", RetryOf: "h1", WorkflowID: "wf",
				Node: "Create order", Message: "the CRM timed out"},
			{Kind: audit.N8NErrorExecution, DedupeKey: "exec:p1", ExecutionID: "p1", WorkflowID: "wf",
				Node: "Create order", Message: "the CRM timed out"},
		} {
			if _, err := s.RecordError(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "pending", ExecutionID: "p1"}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ event, exec, retryOf string }{{"retried", "r2", "h1"}, {"pending", "p1", ""}} {
			d, err := s.Event(ctx, "shop", c.event)
			if err != nil {
				t.Fatal(err)
			}
			if d.ReviewReason != "error" {
				t.Errorf("%s: review reason %q, want error", c.event, d.ReviewReason)
			}
			var line *audit.HistoryLine
			for i := range d.History {
				if d.History[i].Kind == audit.KindError {
					line = &d.History[i]
				}
			}
			if line == nil || line.ExecutionID != c.exec || line.RetryOf != c.retryOf || line.ErrorID == nil {
				t.Errorf("%s: error line %+v, want one of %s retrying %q", c.event, line, c.exec, c.retryOf)
			}
			roles := map[string]string{}
			for _, x := range d.Executions {
				roles[x.ID] = x.Role
			}
			if _, ok := roles[c.exec]; !ok {
				t.Errorf("%s: executions %v, want %s among them", c.event, roles, c.exec)
			}
			alerts := 0
			for _, a := range d.Alerts {
				if a.Kind == audit.RowAlert && strings.Contains(a.Payload, audit.AlertExecutionError) {
					alerts++
				}
			}
			if alerts != 1 {
				t.Errorf("%s: %d alerts about the error, want 1: %+v", c.event, alerts, d.Alerts)
			}
		}
	})
}

// TestOnlyAnErrorThatAlertsWakesTheOutbox: the outbox worker is woken after
// an error that wrote an alert, and not after one that wrote none (of a
// finished event nobody was alerted about), in a round or alone.
func TestOnlyAnErrorThatAlertsWakesTheOutbox(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		for _, api := range []bool{false, true} { // a round of one; alone (n8n's API was asked)
			opts := store.Options{}
			if api {
				opts.Lookup = retryOf{}
			}
			s := audittest.Open(t, dialect, opts)
			for _, c := range []struct{ event, exec string }{{"done", "x1"}, {"held", "x2"}} {
				if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: c.event, ExecutionID: c.exec,
					WorkflowID: "wf"}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "done", ExecutionID: "x1",
				WorkflowID: "wf", Outcome: audit.OutcomeDone}); err != nil {
				t.Fatal(err)
			}
			woken := func() bool {
				select {
				case <-s.Wakeups():
					return true
				default:
					return false
				}
			}
			woken() // what the claims and the outcome left
			for _, c := range []struct {
				exec  string
				alert bool
			}{{"x1", false}, {"x2", true}} {
				res, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution,
					DedupeKey: "exec:" + c.exec, ExecutionID: c.exec, WorkflowID: "wf", Mode: "webhook", Message: "failed"})
				if err != nil || res.Linked == nil {
					t.Fatalf("error of %s: %+v (%v)", c.exec, res, err)
				}
				if got := woken(); got != c.alert {
					t.Errorf("API %v: the error of %s woke the outbox: %v, want %v", api, c.exec, got, c.alert)
				}
			}
		}
	})
}
