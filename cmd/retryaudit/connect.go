package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/retryaudit/retryaudit/n8n"
)

const connectUsage = `connect wires retryaudit into a running n8n through n8n's public API, in place
of the manual steps: it creates (or updates) the Header Auth credential
"retryaudit" with retryaudit's token; imports (or updates) the error workflow
n8n/error-workflow.json, reporting to --service-url, and publishes it;
with --with-example imports n8n/orders-to-crm.json, unpublished, and with
--with-example=node n8n/orders-to-crm-node.json, built with the retryaudit
node (it must be installed in that n8n: connect says how when it is not)
and with its credential "retryaudit API"; sets the
error workflow of the workflows named by --workflows (and with --all-active
of every published workflow that has no other), leaving their other settings
as they are (n8n publishes a published one again). It waits until n8n has
finished publishing, then runs the drill of 'retryaudit check --url'.

It reads n8n first and plans every change before making one: it refuses,
changing nothing, when the API key lacks a scope a change needs, the URL is
not n8n's API, n8n is older than its public API needs, or retryaudit does
not answer at --service-url with the token from its configuration. Run it
with retryaudit's own configuration (in compose: docker compose exec
retryaudit retryaudit connect …). --dry-run prints the changes and makes
none. A second run changes nothing and says "nothing to change".`

// publishSettle is how long connect waits, after the webhooks it can see,
// for the publications it cannot (the error workflow's): several times the
// 0.3-0.5 s n8n 2.41.1 took on a busy machine (FACTS, "Publishing takes a
// moment").
const publishSettle = 2 * time.Second

func connect(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) (err error) {
	out = terminal{out}
	defer func() {
		if err != nil {
			err = printable{err}
		}
	}()
	apiURL := fs.String("n8n-url", "", "n8n's public API, such as http://127.0.0.1:5678/api/v1 (default: RETRYAUDIT_N8N_API_URL)")
	apiKey := fs.String("n8n-api-key", "", "an n8n API key (default: RETRYAUDIT_N8N_API_KEY or its _FILE; a flag shows in ps)")
	serviceURL := fs.String("service-url", "", "retryaudit's address as n8n reaches it (default: RETRYAUDIT_BASE_URL, else http://RETRYAUDIT_ADDR)")
	workflows := fs.String("workflows", "", "ids of the workflows whose failures retryaudit hears of, comma-separated")
	allActive := fs.Bool("all-active", false, "also every published workflow that has no other error workflow")
	var example exampleFlag
	fs.Var(&example, "with-example", "also import the orders template, unpublished: n8n/orders-to-crm.json, or with "+
		"=node n8n/orders-to-crm-node.json, built with the retryaudit node")
	dryRun := fs.Bool("dry-run", false, "print every change and make none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("connect takes flags only, not %q (see retryaudit connect --help)", fs.Arg(0))
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	api, key := cmp.Or(*apiURL, cfg.N8NAPIURL), cmp.Or(*apiKey, cfg.N8NAPIKey)
	if api == "" || key == "" {
		return errors.New("connect needs n8n's public API: --n8n-url and --n8n-api-key, or RETRYAUDIT_N8N_API_URL and " +
			"RETRYAUDIT_N8N_API_KEY (create a key in n8n, Settings → n8n API)")
	}
	if api, err = httpURL("--n8n-url", api); err != nil {
		return err
	}
	service, err := connectServiceURL(*serviceURL, cfg)
	if err != nil {
		return err
	}
	token, err := serviceToken(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	if err := serviceAnswers(ctx, service, token); err != nil {
		return err
	}
	fmt.Fprintf(out, "ok    retryaudit     %s is ready and accepts the token\n", service)
	if err := serviceKeyScopes(ctx, cfg, out); err != nil {
		return err
	}
	w := n8n.Wiring{ServiceURL: service, Token: token, WithExample: example == "http", WithNodeExample: example == "node",
		AllActive: *allActive}
	for _, id := range strings.Split(*workflows, ",") {
		if id = strings.TrimSpace(id); id != "" {
			w.Workflows = append(w.Workflows, id)
		}
	}
	admin := n8n.NewAdmin(api, key)
	plan, err := n8n.PlanWiring(ctx, admin, w)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ok    n8n API        %s accepts the key, with the scopes these changes need\n", api)
	for _, k := range plan.Kept {
		fmt.Fprintf(out, "kept  %s\n", k)
	}
	switch {
	case len(plan.Changes) == 0:
		fmt.Fprintf(out, "nothing to change: n8n reports errors to retryaudit at %s\n", service)
	case *dryRun:
		for i, c := range plan.Changes {
			fmt.Fprintf(out, "plan  %d. %s\n", i+1, c.What)
		}
		fmt.Fprintf(out, "dry run: %d change(s) printed, none made\n", len(plan.Changes))
		return nil
	default:
		i := 0
		err := plan.Apply(ctx, func(c n8n.Change) {
			i++
			fmt.Fprintf(out, "done  %d. %s\n", i, c.What)
		})
		if err != nil {
			return err
		}
		if err := plan.Watch(ctx, publishSettle, time.Minute); err != nil {
			return err
		}
		seen, timed := plan.Published()
		if len(seen) > 0 {
			fmt.Fprintf(out, "ok    published      %s: n8n answers their webhooks\n", strings.Join(seen, ", "))
		}
		if len(timed) > 0 {
			fmt.Fprintf(out, "ok    published      %s: given %s to finish (n8n's API does not show when it has)\n",
				strings.Join(timed, ", "), publishSettle)
		}
	}
	if *dryRun {
		return nil
	}
	fmt.Fprintf(out, "\nThe drill, through %s (retryaudit check --url):\n", service)
	return check(ctx, flag.NewFlagSet("retryaudit check", flag.ContinueOnError), []string{"--url", service}, getenv, out)
}

// exampleFlag is --with-example: alone (or =http) the template with HTTP
// Request nodes, =node the one built with the retryaudit node.
type exampleFlag string

func (e *exampleFlag) String() string   { return string(*e) }
func (e *exampleFlag) IsBoolFlag() bool { return true }
func (e *exampleFlag) Set(v string) error {
	switch v {
	case "true", "http":
		*e = "http"
	case "false":
		*e = ""
	case "node":
		*e = "node"
	default:
		return fmt.Errorf("--with-example takes nothing, =http or =node, not %q", v)
	}
	return nil
}

// httpURL returns the URL without a trailing slash when it is http(s).
func httpURL(name, v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: %q is not an http(s) URL", name, v)
	}
	return strings.TrimRight(v, "/"), nil
}

// connectServiceURL is where n8n reaches retryaudit: the flag, the public
// address, or the listener when it is one n8n could reach.
func connectServiceURL(flagged string, cfg config) (string, error) {
	if flagged != "" {
		return httpURL("--service-url", flagged)
	}
	if cfg.BaseURL != "" {
		return cfg.BaseURL, nil
	}
	host, port, _ := net.SplitHostPort(cfg.Addr)
	if host == "" || host == "0.0.0.0" || host == "::" {
		return "", fmt.Errorf("retryaudit listens on %s and has no RETRYAUDIT_BASE_URL: say with --service-url "+
			"where n8n reaches it (such as http://retryaudit:8080 in compose)", cfg.Addr)
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// serviceToken is the token the running service accepts: RETRYAUDIT_TOKEN,
// or the one serve generated into the data folder.
func serviceToken(cfg config) (string, error) {
	if cfg.Token != "" {
		return cfg.Token, nil
	}
	path := filepath.Join(cfg.DataDir, "token")
	b, err := os.ReadFile(path)
	if token := strings.TrimSpace(string(b)); err == nil && token != "" {
		return token, nil
	}
	return "", fmt.Errorf("RETRYAUDIT_TOKEN is unset and %s holds no token: run connect with retryaudit's own "+
		"configuration, after serve has started once", path)
}

// serviceAnswers checks, before anything changes in n8n, that retryaudit
// answers at the address n8n will call and accepts the token the
// credential will carry.
func serviceAnswers(ctx context.Context, base, token string) error {
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: n8n.CheckRedirect}
	get := func(path string, auth bool) (int, map[string]any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, nil, err
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body)
		return resp.StatusCode, body, nil
	}
	status, body, err := get("/readyz", false)
	switch {
	case err != nil:
		return fmt.Errorf("retryaudit does not answer at %s (--service-url, where n8n will call it): %w; "+
			"in compose, run connect inside the retryaudit container", base, errors.Unwrap(err))
	case status != http.StatusOK || body["status"] != "ready":
		return fmt.Errorf("%s/readyz answered %d %v: not a ready retryaudit (--service-url is where n8n reaches retryaudit)",
			base, status, body)
	}
	status, _, err = get("/v1/events?limit=1", true)
	switch {
	case err != nil:
		return err
	case status == http.StatusUnauthorized:
		return fmt.Errorf("retryaudit at %s refuses the token from this configuration (RETRYAUDIT_TOKEN, or "+
			"data/token): run connect with the service's own configuration", base)
	case status != http.StatusOK:
		return fmt.Errorf("retryaudit at %s answered GET /v1/events with %d", base, status)
	}
	return nil
}

// serviceKeyScopes checks the key retryaudit itself reads n8n with: the
// lineage of a Retry and reconciliation need it to read executions.
func serviceKeyScopes(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.N8NAPIURL == "" {
		fmt.Fprintln(out, "note  retryaudit has no n8n API of its own (RETRYAUDIT_N8N_API_URL, RETRYAUDIT_N8N_API_KEY): "+
			"without it a Retry's outcome waits for a person; set them and restart retryaudit")
		return nil
	}
	d, err := n8n.NewAdmin(cfg.N8NAPIURL, cfg.N8NAPIKey).Discover(ctx)
	if err != nil {
		return fmt.Errorf("retryaudit's own n8n API (RETRYAUDIT_N8N_API_URL %s): %w", cfg.N8NAPIURL, err)
	}
	for _, s := range []string{"execution:read", "execution:list"} {
		if !slices.Contains(d.Scopes, s) {
			return fmt.Errorf("retryaudit's own n8n API key (RETRYAUDIT_N8N_API_KEY) lacks the scope %s, which the lineage "+
				"of a Retry and reconciliation need: give the key that scope in n8n (Settings → n8n API); nothing was changed", s)
		}
	}
	return nil
}

// terminal is connect's output: what n8n says reaches it (names, ids,
// messages, the drill's answers), so escape sequences and control
// characters are taken out of every line, whoever wrote it. n8n's own
// words are also cut to n8n.MaxSaid characters where they are written.
type terminal struct{ w io.Writer }

func (t terminal) Write(b []byte) (int, error) {
	if _, err := io.WriteString(t.w, n8n.Strip(string(b), true)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// printable is connect's error as main prints it: n8n's words in it
// stripped as on the output.
type printable struct{ err error }

func (p printable) Error() string { return n8n.Strip(p.err.Error(), true) }
func (p printable) Unwrap() error { return p.err }
