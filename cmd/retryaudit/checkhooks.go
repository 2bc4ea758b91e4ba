package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

// hookToken reports where the hook token comes from, and returns it ("" when
// serve has not generated it yet: the hooks are optional).
func (c *checker) hookToken(cfg config) string {
	if cfg.HookToken != "" {
		c.line("hook token", "from RETRYAUDIT_HOOK_TOKEN", nil)
		return cfg.HookToken
	}
	path := filepath.Join(cfg.DataDir, "hook-token")
	b, err := os.ReadFile(path)
	token := strings.TrimSpace(string(b))
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.line("hook token", "not generated yet: serve writes "+path+" at its first start", nil)
	case err != nil:
		c.line("hook token", "", fmt.Errorf("%s cannot be read: %v", path, err))
	case token == "":
		c.line("hook token", "", fmt.Errorf("%s is empty: delete it to have a new hook token generated", path))
	default:
		c.line("hook token", "generated, kept in "+path, nil)
	}
	return token
}

// hookCalls says, per n8n instance, when its execution hooks last called.
func (c *checker) hookCalls(ctx context.Context, cfg config, s *store.Store) {
	instances := []string{audit.DefaultInstance}
	for _, in := range cfg.Instances {
		instances = append(instances, in.Name)
	}
	for _, instance := range instances {
		name := "hooks"
		if len(instances) > 1 {
			name = "hooks (" + instance + ")"
		}
		call, ok, err := s.LastHookCall(ctx, instance)
		switch {
		case err != nil:
			c.line(name, "", err)
		case !ok:
			c.line(name, "no call yet: n8n does not load n8n/retryaudit-hooks.js (EXTERNAL_HOOK_FILES), has run "+
				"nothing since, or cannot reach the service; the hooks are optional: reconciliation finds failures without them", nil)
		default:
			what := "the start of"
			if call.Phase == audit.PhaseEnd {
				what = "the end of"
			}
			detail := fmt.Sprintf("last call %s ago: %d report(s), the last %s execution %s", time.Since(call.At).Round(time.Second),
				call.Reports, what, call.ExecutionID)
			if call.Status != "" {
				detail += " (" + call.Status + ")"
			}
			c.line(name, detail, nil)
		}
	}
}

// hookDrill checks the hooks' endpoint of a running instance without
// recording anything: the hook token opens it (a report that cannot be valid
// is refused naming its field), the API token does not, and the hook token
// opens no other endpoint.
func (c *checker) hookDrill(ctx context.Context, base, apiToken, hookToken string) {
	if hookToken == "" {
		c.line("drill: hooks", "skipped: no hook token to drill with", nil)
		return
	}
	client := &http.Client{Timeout: 20 * time.Second, CheckRedirect: n8n.CheckRedirect}
	post := func(token, path, body string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", fmt.Errorf("%s: %w", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, string(b), nil
	}
	const drill = `{"reports":[{"phase":"retryaudit check: a drill, never recorded","execution_id":"retryaudit-check",` +
		`"workflow_id":"retryaudit-check","mode":"drill","started_at":"2026-01-01T00:00:00Z"}]}`
	code, body, err := post(hookToken, "/v1/n8n/executions", drill)
	switch {
	case err != nil:
	case code == http.StatusUnauthorized:
		err = errors.New("the service refused the hook token (401): check RETRYAUDIT_HOOK_TOKEN and DATA_DIR/hook-token")
	case code == http.StatusNotFound:
		err = errors.New("the service has no POST /v1/n8n/executions (404): an older version?")
	case code != http.StatusUnprocessableEntity || !strings.Contains(body, "reports[0].phase"):
		err = fmt.Errorf("a report that cannot be valid was answered %d, want 422 naming reports[0].phase: %.200s", code, body)
	}
	if err == nil {
		if code, _, err = post(apiToken, "/v1/n8n/executions", drill); err == nil && code != http.StatusUnauthorized {
			err = fmt.Errorf("the API token opens the hooks' endpoint (%d), want 401: a workflow could speak as n8n", code)
		}
	}
	if err == nil {
		if code, _, err = post(hookToken, "/v1/claims", `{}`); err == nil && code != http.StatusUnauthorized {
			err = fmt.Errorf("the hook token opens /v1/claims (%d), want 401", code)
		}
	}
	c.line("drill: hooks", "through "+base+": the hook token opens POST /v1/n8n/executions (nothing recorded), "+
		"the API token does not, the hook token opens nothing else", err)
}
