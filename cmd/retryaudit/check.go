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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/notify"
)

const checkUsage = `check reads the same configuration as serve and checks the installation: the
configuration, the database, its schema and the unique key on (source,
event_id), the API token, Slack (auth.test) and n8n's API when they are
configured. Then it runs a drill on the scratch source retryaudit-check: the
same claim twice, 20 concurrent claims of one key (exactly one may process
it), an outcome, and cleanup. With --url the drill goes through the HTTP API
of the running instance at that address; without it, in this process.

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
	url := fs.String("url", "", "run the drill through the HTTP API of the running instance at this URL (such as http://127.0.0.1:8080)")
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
	token := c.token(cfg)
	c.integrations(ctx, cfg)
	if schemaOK {
		c.drill(ctx, a.store, *url, token)
	}
	return c.result()
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

func (c *checker) schema(ctx context.Context, s *audit.Store) bool {
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
		who, err := n.AuthTest(ctx)
		c.line("slack", "auth.test: the token is "+who+", channel "+cfg.SlackChannel, err)
	default:
		c.line("slack", "incoming webhook configured (not called: run retryaudit slack-test)", nil)
	}
	if cfg.N8NAPIURL == "" {
		c.line("n8n API", "not configured: no lineage lookups, no reconciliation", nil)
		return
	}
	err := n8n.New(cfg.N8NAPIURL, cfg.N8NAPIKey, nil).Check(ctx)
	c.line("n8n API", "reachable at "+cfg.N8NAPIURL+", the key is accepted", err)
}

// claimer is how the drill claims: in this process, or through the API.
type claimer func(ctx context.Context, event, execution string) (bool, error)

func (c *checker) drill(ctx context.Context, s *audit.Store, url, token string) {
	b := make([]byte, 4)
	rand.Read(b)
	run := audit.ScratchSource + "-" + hex.EncodeToString(b)
	claim, outcome, how := c.drillInProcess(s)
	if url != "" {
		claim, outcome, how = c.drillOverHTTP(strings.TrimRight(url, "/"), token)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		c.line("cleanup", "the drill's events are deleted", s.DeleteScratch(cctx, run))
	}()

	first, err := claim(ctx, run+"-twice", run+"-1")
	if err == nil {
		var second bool
		second, err = claim(ctx, run+"-twice", run+"-2")
		if err == nil && (!first || second) {
			err = fmt.Errorf("the same event claimed twice: process %v then %v, want true then false", first, second)
		}
	}
	c.line("drill: twice", how+": the same event twice, processed once", err)

	const racers = 20
	var mu sync.Mutex
	var wg sync.WaitGroup
	wins, errs := 0, []error{}
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := claim(ctx, run+"-race", fmt.Sprintf("%s-r%d", run, i))
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
	err = nil
	if len(errs) > 0 {
		err = fmt.Errorf("%d of %d claims failed, the first: %v", len(errs), racers, errs[0])
	} else if wins != 1 {
		err = fmt.Errorf("%d of %d concurrent claims of one key were told to process it, want exactly 1", wins, racers)
	}
	c.line("drill: race", fmt.Sprintf("%s: %d concurrent claims of one key, one processed", how, racers), err)

	err = outcome(ctx, run+"-twice", run+"-1")
	if err == nil {
		var again bool
		if again, err = claim(ctx, run+"-twice", run+"-3"); err == nil && again {
			err = errors.New("a done event was processed again")
		}
	}
	c.line("drill: outcome", how+": done, then a redelivery is a duplicate", err)
}

func (c *checker) drillInProcess(s *audit.Store) (claimer, func(context.Context, string, string) error, string) {
	claim := func(ctx context.Context, event, execution string) (bool, error) {
		r, err := s.Claim(ctx, audit.ClaimRequest{Source: audit.ScratchSource, EventID: event, ExecutionID: execution})
		return r.Process, err
	}
	outcome := func(ctx context.Context, event, execution string) error {
		_, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: audit.ScratchSource, EventID: event,
			Outcome: audit.OutcomeDone, ExecutionID: execution})
		return err
	}
	return claim, outcome, "in process"
}

func (c *checker) drillOverHTTP(base, token string) (claimer, func(context.Context, string, string) error, string) {
	client := &http.Client{Timeout: 20 * time.Second}
	post := func(ctx context.Context, path string, body map[string]any) (map[string]any, error) {
		raw, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(string(raw)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
			return nil, fmt.Errorf("%s answered %d without JSON", path, resp.StatusCode)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s answered %d: %v", path, resp.StatusCode, out["error"])
		}
		return out, nil
	}
	claim := func(ctx context.Context, event, execution string) (bool, error) {
		out, err := post(ctx, "/v1/claims", map[string]any{"source": audit.ScratchSource, "event_id": event,
			"execution_id": execution, "workflow_name": "retryaudit check"})
		return out["process"] == true, err
	}
	outcome := func(ctx context.Context, event, execution string) error {
		_, err := post(ctx, "/v1/outcomes", map[string]any{"source": audit.ScratchSource, "event_id": event,
			"outcome": "done", "execution_id": execution})
		return err
	}
	return claim, outcome, "through " + base
}
