package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/notify"
)

const checkUsage = `check reads the same configuration as serve and checks the installation: the
configuration, the database, its schema and the unique key on (source,
event_id), that no alert waits more than 5 minutes to reach Slack, the API
and hook tokens, Slack (auth.test; the app token's Socket Mode with
apps.connections.open when the buttons are on) and n8n's API when they are configured,
and when each n8n instance's execution hooks last called. Then it runs a
drill of the six control steps on the scratch
sources retryaudit-check and retryaudit-check.other: the same claim twice
(processed once, a duplicate after done); 20 concurrent claims of one key
(exactly one may process it); a new event id; the same id from another
source; an unknown outcome (the entry stays processing, waits for review and
has an alert naming the source and the event id; drill alerts are never
sent); a Retry of the holder that ends done with one outcome. Then cleanup.

With --url the drill goes through the HTTP API of the running instance at
that address, and n8n's lineage of the Retry reaches the service the way an
Error Trigger payload brings it; without --url it runs in this process, and
the lineage comes from a stand-in for n8n's API. With --url it also drills
the hooks' endpoint, recording nothing: the hook token opens it, the API
token does not, and the hook token opens nothing else.

It prints one line per check, ok or FAIL with the reason, and exits 0 only
when every check passes.`

// checker prints one line per check and remembers failures.
type checker struct {
	out    io.Writer
	failed []string
}

func (c *checker) line(name string, detail string, err error) bool {
	if err != nil {
		fmt.Fprintf(c.out, "FAIL  %-14s %v\n", name, err)
		c.failed = append(c.failed, name)
		return false
	}
	fmt.Fprintf(c.out, "ok    %-14s %s\n", name, detail)
	return true
}

func check(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error {
	target := fs.String("url", "", "run the drill through the HTTP API of the running instance at this URL (such as http://127.0.0.1:8080)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := &checker{out: out}
	cfg, err := loadConfig(getenv)
	if !c.line("configuration", "read from the environment", err) {
		return c.result()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a, err := openApp(ctx, cfg, newLogger(io.Discard, cfg.LogLevel), nil, false)
	if !c.line("database", where(a), err) {
		c.token(cfg)
		c.integrations(ctx, cfg)
		return c.result()
	}
	defer a.store.Close()
	schemaOK := c.schema(ctx, a.store)
	if schemaOK {
		c.alerts(ctx, a.store)
	}
	token := c.token(cfg)
	hookToken := c.hookToken(cfg)
	c.integrations(ctx, cfg)
	if schemaOK {
		c.hookCalls(ctx, cfg, a.store)
		c.runDrill(ctx, cfg, a, *target, token)
		if *target != "" {
			c.hookDrill(ctx, strings.TrimRight(*target, "/"), token, hookToken)
		}
	}
	return c.result()
}

// runDrill runs the drill and cleans up after it, whatever happened.
func (c *checker) runDrill(ctx context.Context, cfg config, a *app, base, token string) {
	b := make([]byte, 4)
	rand.Read(b)
	run := audit.ScratchSource + "-" + hex.EncodeToString(b)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		c.line("cleanup", "the drill's events are deleted", a.store.DeleteScratch(cctx, run))
	}()
	if base != "" {
		c.drill(ctx, &overHTTP{base: strings.TrimRight(base, "/"), token: token,
			client: &http.Client{Timeout: 20 * time.Second, CheckRedirect: n8n.CheckRedirect}}, run)
		return
	}
	n := &drillN8N{retries: map[string]string{}}
	if a.n8n != nil {
		n.next = a.n8n
	}
	s, err := store.Open(ctx, store.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, ReviewAfter: cfg.ReviewAfter,
		Lookup: n, Redactor: n8n.Redactor{}})
	if err != nil {
		c.line("drill", "", err)
		return
	}
	defer s.Close()
	c.drill(ctx, &inProcess{s: s, n8n: n}, run)
}

func where(a *app) string {
	if a == nil {
		return ""
	}
	return a.store.Dialect() + ": " + a.store.Where()
}

func (c *checker) result() error {
	if len(c.failed) > 0 {
		return fmt.Errorf("%d check(s) failed: %s", len(c.failed), strings.Join(c.failed, ", "))
	}
	fmt.Fprintln(c.out, "all checks passed")
	return nil
}

func (c *checker) schema(ctx context.Context, s *store.Store) bool {
	current, err := s.SchemaCurrent(ctx)
	if err == nil && !current {
		err = errors.New("migrations are pending: run retryaudit migrate")
	}
	if !c.line("schema", "current", err) {
		return false
	}
	unique, err := s.HasUniqueKey(ctx)
	if err == nil && !unique {
		err = errors.New("webhook_events has no unique key on (source, event_id): two claims of one key could both win; " +
			"restore it: ALTER TABLE webhook_events ADD PRIMARY KEY (source, event_id)")
	}
	return c.line("unique key", "webhook_events (source, event_id)", err)
}

// alerts fails while Slack messages wait longer than they should: an alert
// held back is one nobody receives.
func (c *checker) alerts(ctx context.Context, s *store.Store) {
	st, err := s.Stats(ctx)
	if err == nil && st.HeldBack > 0 {
		err = errors.New(st.HeldBackNote())
	}
	c.line("alerts", "none held back (waiting more than "+audit.HumanDuration(audit.HeldBackAfter, " ")+")", err)
}

// token checks that the API has a token, and returns it for the drill.
func (c *checker) token(cfg config) string {
	if cfg.Token != "" {
		c.line("token", "from RETRYAUDIT_TOKEN", nil)
		return cfg.Token
	}
	path := filepath.Join(cfg.DataDir, "token")
	b, err := os.ReadFile(path)
	token := strings.TrimSpace(string(b))
	switch {
	case err != nil:
		err = fmt.Errorf("RETRYAUDIT_TOKEN is unset and %s cannot be read (serve generates it at first start): %v", path, err)
	case token == "":
		err = fmt.Errorf("%s is empty: delete it to have a new token generated", path)
	}
	c.line("token", "generated, kept in "+path, err)
	return token
}

func (c *checker) integrations(ctx context.Context, cfg config) {
	switch n := newNotifier(cfg).(type) {
	case nil:
		c.line("slack", "not configured: alerts are recorded, not sent", nil)
	case *notify.Bot:
		info, err := n.AuthTest(ctx)
		c.line("slack", "auth.test: the token is "+info.Who+", channel "+cfg.SlackChannel, err)
	default:
		c.line("slack", "incoming webhook configured (not called: run retryaudit slack-test)", nil)
	}
	c.slackActions(ctx, cfg)
	if cfg.N8NAPIURL == "" {
		c.line("n8n API", "not configured: no lineage lookups, no reconciliation", nil)
	} else {
		err := n8n.New(cfg.N8NAPIURL, cfg.N8NAPIKey, nil).Check(ctx)
		c.line("n8n API", "reachable at "+cfg.N8NAPIURL+", the key is accepted", err)
	}
	for _, in := range cfg.Instances {
		name := "n8n API (" + in.Name + ")"
		if in.APIURL == "" {
			c.line(name, "not configured: no lineage lookups, no reconciliation for "+in.Name, nil)
			continue
		}
		err := n8n.New(in.APIURL, in.APIKey, nil).Check(ctx)
		c.line(name, "reachable at "+in.APIURL+", the key is accepted", err)
	}
}

// drill is how the drill talks to the service: in this process, or
// through the HTTP API of a running instance.
type drill interface {
	how() string
	claim(ctx context.Context, source, event, execution string) (process bool, err error)
	outcome(ctx context.Context, event, execution string, o audit.Outcome) error
	// retryOf tells the service that execution is a Retry of holder, and
	// whether in n8n's own word (else as an Error Trigger payload does,
	// which the service does not take for n8n's).
	retryOf(ctx context.Context, execution, holder string) (confirmed bool, err error)
	event(ctx context.Context, event string) (drillEvent, error)
}

// drillEvent is what the drill reads back of an entry.
type drillEvent struct {
	Status       audit.Status
	NeedsReview  bool
	Alerts       int // alerts that open a thread
	AlertNames   bool
	DoneOutcomes int
	Outcome      string // the message of the last outcome
}

func (c *checker) drill(ctx context.Context, d drill, run string) {
	how := d.how()
	src, other := audit.ScratchSource, audit.ScratchSource+".other"
	first, err := d.claim(ctx, src, run+"-twice", run+"-1")
	if err == nil {
		var second bool
		second, err = d.claim(ctx, src, run+"-twice", run+"-2")
		if err == nil && (!first || second) {
			err = fmt.Errorf("the same event claimed twice: process %v then %v, want true then false", first, second)
		}
	}
	if err == nil {
		if err = d.outcome(ctx, run+"-twice", run+"-1", audit.OutcomeDone); err == nil {
			var again bool
			if again, err = d.claim(ctx, src, run+"-twice", run+"-3"); err == nil && again {
				err = errors.New("a done event was processed again")
			}
		}
	}
	c.line("drill: twice", how+": the same event twice, processed once; after done, a duplicate", err)

	c.line("drill: race", fmt.Sprintf("%s: 20 concurrent claims of one key, one processed", how), c.race(ctx, d, run))

	err = wantProcess(d.claim(ctx, src, run+"-new", run+"-4"))
	c.line("drill: new id", how+": another event id is another event", err)

	err = wantProcess(d.claim(ctx, other, run+"-twice", run+"-5"))
	c.line("drill: source", how+": the same event id from another source is another event", err)

	err = c.unknown(ctx, d, run)
	c.line("drill: unknown", how+": unknown stays processing, waits for review, alert names source and event id", err)

	err = c.retry(ctx, d, run)
	c.line("drill: retry", how+": a Retry of the holder, presenting the run stamp it replays, ends done with one outcome", err)
}

func wantProcess(process bool, err error) error {
	if err == nil && !process {
		err = errors.New("it was not processed")
	}
	return err
}

func (c *checker) race(ctx context.Context, d drill, run string) error {
	const racers = 20
	var mu sync.Mutex
	var wg sync.WaitGroup
	wins, errs := 0, []error{}
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := d.claim(ctx, audit.ScratchSource, run+"-race", fmt.Sprintf("%s-r%d", run, i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				wins++
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d claims failed, the first: %v", len(errs), racers, errs[0])
	}
	if wins != 1 {
		return fmt.Errorf("%d of %d concurrent claims of one key were told to process it, want exactly 1", wins, racers)
	}
	return nil
}

func (c *checker) unknown(ctx context.Context, d drill, run string) error {
	if err := wantProcess(d.claim(ctx, audit.ScratchSource, run+"-unknown", run+"-6")); err != nil {
		return err
	}
	if err := d.outcome(ctx, run+"-unknown", run+"-6", audit.OutcomeUnknown); err != nil {
		return err
	}
	ev, err := d.event(ctx, run+"-unknown")
	switch {
	case err != nil:
		return err
	case ev.Status != audit.StatusProcessing:
		return fmt.Errorf("the entry is %s after unknown, want processing", ev.Status)
	case !ev.NeedsReview:
		return errors.New("the entry does not wait for review")
	case ev.Alerts != 1 || !ev.AlertNames:
		return fmt.Errorf("%d alerts naming the source and the event id, want 1", ev.Alerts)
	}
	return nil
}

func (c *checker) retry(ctx context.Context, d drill, run string) error {
	event, holder, retry := run+"-retry", run+"-7", run+"-7-retry"
	if err := wantProcess(d.claim(ctx, audit.ScratchSource, event, holder)); err != nil {
		return err
	}
	if err := d.outcome(ctx, event, holder, audit.OutcomeUnknown); err != nil {
		return err
	}
	if _, err := d.retryOf(ctx, retry, holder); err != nil {
		return err
	}
	// The Retry presents the run stamp of the execution it retries (n8n
	// replays the node that made it): that is what tells it, n8n's API or
	// not.
	if err := d.outcome(ctx, event, retry, audit.OutcomeDone); err != nil {
		return fmt.Errorf("the Retry's done: %w", err)
	}
	ev, err := d.event(ctx, event)
	switch {
	case err != nil:
		return err
	case ev.Status != audit.StatusDone || ev.DoneOutcomes != 1:
		return fmt.Errorf("the entry is %s with %d done outcomes, want done with 1", ev.Status, ev.DoneOutcomes)
	case !strings.HasPrefix(ev.Outcome, "done by retry "+retry+" of "+holder):
		return fmt.Errorf("the outcome says %q, want it done by the retry", ev.Outcome)
	}
	return nil
}

// drillN8N stands in for n8n's API in the drill: it knows the Retries the
// drill starts and asks the real API, when configured, about the rest.
type drillN8N struct {
	mu      sync.Mutex
	retries map[string]string // execution → what it retries
	next    audit.ExecutionLookup
}

// Execution answers for the drill's Retries.
func (n *drillN8N) Execution(ctx context.Context, id string) (audit.N8NExecution, error) {
	n.mu.Lock()
	parent, ok := n.retries[id]
	n.mu.Unlock()
	switch {
	case ok:
		return audit.N8NExecution{ID: id, Mode: "retry", RetryOf: parent, Status: "success"}, nil
	case n.next != nil:
		return n.next.Execution(ctx, id)
	}
	return audit.N8NExecution{}, audit.ErrExecutionNotFound
}

// inProcess drills a store opened with the drill's stand-in for n8n.
type inProcess struct {
	s   *store.Store
	n8n *drillN8N
}

func (d *inProcess) how() string { return "in process" }

func (d *inProcess) claim(ctx context.Context, source, event, execution string) (bool, error) {
	var r audit.ClaimResult
	err := untilServed(ctx, func() error {
		var err error
		r, err = d.s.Claim(ctx, audit.ClaimRequest{Source: source, EventID: event, ExecutionID: execution,
			WorkflowID: checkWorkflow, WorkflowName: "retryaudit check", RunStamp: drillStamp(execution)})
		return err
	})
	return r.Process, err
}

// untilServed sends a drill's claim again while the service sheds it as
// overloaded (503, as n8n's Retry On Fail would): the drill checks what is
// decided, and a busy machine may shed 20 claims at once. It gives up when
// ctx ends.
func untilServed(ctx context.Context, send func() error) error {
	for {
		err := send()
		if c := audit.ErrorCode(err); c != audit.CodeUnavailable && c != audit.CodeBusy {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *inProcess) outcome(ctx context.Context, event, execution string, o audit.Outcome) error {
	_, err := d.s.ReportOutcome(ctx, audit.OutcomeRequest{Source: audit.ScratchSource, EventID: event,
		Outcome: o, ExecutionID: execution, WorkflowID: checkWorkflow, Reason: "retryaudit check",
		RunStamp: drillStamp(execution)})
	return err
}

func (d *inProcess) retryOf(_ context.Context, execution, holder string) (bool, error) {
	d.n8n.mu.Lock()
	defer d.n8n.mu.Unlock()
	d.n8n.retries[execution] = holder
	return true, nil
}

func (d *inProcess) event(ctx context.Context, event string) (drillEvent, error) {
	e, err := d.s.Event(ctx, audit.ScratchSource, event)
	if err != nil {
		return drillEvent{}, err
	}
	out := drillEvent{Status: e.Status, NeedsReview: e.NeedsReview}
	for _, row := range e.Alerts {
		if row.Kind != audit.RowAlert {
			continue
		}
		out.Alerts++
		a, err := row.Alert()
		out.AlertNames = err == nil && a.Source == audit.ScratchSource && a.EventID == event
	}
	for _, l := range e.History {
		if l.Kind == audit.KindOutcome {
			out.Outcome = l.Message
			if l.Decision == string(audit.OutcomeDone) {
				out.DoneOutcomes++
			}
		}
	}
	return out, nil
}

// overHTTP drills a running instance through its API.
type overHTTP struct {
	base, token string
	client      *http.Client
}

func (d *overHTTP) how() string { return "through " + d.base }

func (d *overHTTP) call(ctx context.Context, method, path string, body any, want int) (map[string]any, error) {
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = strings.NewReader(string(raw))
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s answered %d without JSON", path, resp.StatusCode)
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && want != http.StatusServiceUnavailable:
		return nil, &audit.Error{Code: audit.CodeUnavailable, Message: fmt.Sprintf("%s answered 503: %v", path, out["error"])}
	case resp.StatusCode != want:
		apiErr, _ := out["error"].(map[string]any)
		code := audit.CodeInternal
		if c, _ := apiErr["code"].(string); c == string(audit.CodeNotHolder) || c == string(audit.CodeConflict) {
			code = audit.Code(c)
		}
		return nil, &audit.Error{Code: code, Message: fmt.Sprintf("%s answered %d: %v", path, resp.StatusCode, apiErr)}
	}
	return out, nil
}

// checkWorkflow is the workflow id the drill's claims and outcomes name.
const checkWorkflow = "retryaudit-check"

// drillStamp is the run stamp a drill's execution presents, as the shipped
// workflow's would: its own, or for a Retry ("…-retry") the one of the
// execution it retries, which n8n replays.
func drillStamp(execution string) string { return strings.TrimSuffix(execution, "-retry") + ":0:drill" }

func (d *overHTTP) claim(ctx context.Context, source, event, execution string) (bool, error) {
	var out map[string]any
	err := untilServed(ctx, func() error {
		var err error
		out, err = d.call(ctx, http.MethodPost, "/v1/claims", map[string]any{"source": source, "event_id": event,
			"execution_id": execution, "workflow_id": checkWorkflow, "workflow_name": "retryaudit check",
			"run_stamp": drillStamp(execution)}, http.StatusOK)
		return err
	})
	return out["process"] == true, err
}

func (d *overHTTP) outcome(ctx context.Context, event, execution string, o audit.Outcome) error {
	_, err := d.call(ctx, http.MethodPost, "/v1/outcomes", map[string]any{"source": audit.ScratchSource,
		"event_id": event, "outcome": string(o), "execution_id": execution, "workflow_id": checkWorkflow,
		"reason": "retryaudit check", "run_stamp": drillStamp(execution)}, http.StatusOK)
	return err
}

// retryOf posts what n8n's Error Trigger sends for a failed Retry: the
// lineage, in n8n's own words.
func (d *overHTTP) retryOf(ctx context.Context, execution, holder string) (bool, error) {
	_, err := d.call(ctx, http.MethodPost, "/v1/n8n/errors", map[string]any{
		"execution": map[string]any{"id": execution, "retryOf": holder, "mode": "retry",
			"error": map[string]any{"message": "retryaudit check: a drill, not an incident"}},
		"workflow": map[string]any{"id": checkWorkflow, "name": "retryaudit check"},
	}, http.StatusAccepted)
	return false, err
}

func (d *overHTTP) event(ctx context.Context, event string) (drillEvent, error) {
	out, err := d.call(ctx, http.MethodGet, "/v1/events/"+audit.ScratchSource+"/"+url.PathEscape(event), nil, http.StatusOK)
	if err != nil {
		return drillEvent{}, err
	}
	ev := drillEvent{Status: audit.Status(fmt.Sprint(out["status"])), NeedsReview: out["needs_review"] == true}
	alerts, _ := out["alerts"].([]any)
	for _, a := range alerts {
		if m, _ := a.(map[string]any); m["kind"] == audit.RowAlert {
			ev.Alerts++
			ev.AlertNames = m["source"] == audit.ScratchSource && m["event_id"] == event
		}
	}
	history, _ := out["history"].([]any) // newest first
	for _, l := range history {
		m, _ := l.(map[string]any)
		if m["kind"] == audit.KindOutcome {
			if ev.Outcome == "" {
				ev.Outcome = fmt.Sprint(m["message"])
			}
			if m["decision"] == string(audit.OutcomeDone) {
				ev.DoneOutcomes++
			}
		}
	}
	return ev, nil
}
