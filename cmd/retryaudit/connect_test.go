package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

// runConnect runs retryaudit connect with env and returns its output.
func runConnect(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"connect"}, args...), func(k string) string { return env[k] }, &out)
	return out.String(), err
}

// connectEnv is the configuration of a service started for connect: the
// fake n8n's API, and where the service listens.
func connectEnv(f *n8ntest.Fake, dir string) map[string]string {
	return map[string]string{"RETRYAUDIT_DATA_DIR": dir, "RETRYAUDIT_TOKEN": tok("connect-test-token"),
		"RETRYAUDIT_N8N_API_URL": f.APIURL(), "RETRYAUDIT_N8N_API_KEY": n8ntest.Key}
}

func ordersWorkflow() map[string]any {
	return map[string]any{"name": "Orders", "connections": map[string]any{}, "settings": map[string]any{"timezone": "UTC"},
		"nodes": []any{map[string]any{"id": "n1", "name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
			"position": []any{0, 0}, "parameters": map[string]any{"path": "orders", "httpMethod": "POST"}}}}
}

func TestConnect(t *testing.T) {
	f := n8ntest.NewFake(t)
	orders := f.AddWorkflow(ordersWorkflow(), true)
	dir := t.TempDir()
	env := connectEnv(f, dir)
	svc := startService(t, env)
	env["RETRYAUDIT_BASE_URL"] = svc.URL

	t.Run("a dry run prints every change and makes none", func(t *testing.T) {
		out, err := runConnect(t, env, "--dry-run", "--with-example", "--workflows", orders)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.Count(out, "\nplan  ") != 5 || !strings.Contains(out, "dry run: 5 change(s) printed, none made") ||
			strings.Contains(out, "drill") {
			t.Errorf("output:\n%s", out)
		}
		if m := f.Mutations(); len(m) != 0 {
			t.Errorf("a dry run wrote %v", m)
		}
	})
	t.Run("it wires, waits for publication, then runs the drill", func(t *testing.T) {
		out, err := runConnect(t, env, "--with-example", "--workflows", orders)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, says := range []string{"ok    retryaudit     " + svc.URL + " is ready and accepts the token",
			"done  1. create the Header Auth credential", "done  5. set the error workflow of \"Orders\"",
			`ok    published      "Orders": n8n answers their webhooks`,
			`ok    published      "retryaudit: report errors": given 2s to finish`,
			"ok    drill: retry   through " + svc.URL, "all checks passed"} {
			if !strings.Contains(out, says) {
				t.Errorf("the output does not say %q:\n%s", says, out)
			}
		}
		if data, _, _ := f.Credential("retryaudit"); data["value"] != "Bearer "+tok("connect-test-token") {
			t.Errorf("the credential holds %v", data)
		}
	})
	t.Run("a second run has nothing to change", func(t *testing.T) {
		before := len(f.Mutations())
		out, err := runConnect(t, env, "--with-example", "--workflows", orders)
		if err != nil || !strings.Contains(out, "nothing to change: n8n reports errors to retryaudit at "+svc.URL) ||
			!strings.Contains(out, "all checks passed") {
			t.Fatalf("%v\n%s", err, out)
		}
		if m := f.Mutations(); len(m) != before {
			t.Errorf("the second run wrote %v", m[before:])
		}
	})
}

func TestConnectRefuses(t *testing.T) {
	f := n8ntest.NewFake(t)
	dir := t.TempDir()
	env := connectEnv(f, dir)
	svc := startService(t, env)
	with := func(changes map[string]string) map[string]string {
		e := map[string]string{"RETRYAUDIT_BASE_URL": svc.URL}
		for k, v := range env {
			e[k] = v
		}
		for k, v := range changes {
			if v == "" {
				delete(e, k)
			} else {
				e[k] = v
			}
		}
		return e
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		says string
	}{
		{"without n8n's API", with(map[string]string{"RETRYAUDIT_N8N_API_URL": "", "RETRYAUDIT_N8N_API_KEY": ""}), nil,
			"connect needs n8n's public API"},
		{"a service URL where nothing answers", with(nil), []string{"--service-url", "http://" + freeAddr(t)},
			"retryaudit does not answer at"},
		{"another service's token", with(map[string]string{"RETRYAUDIT_TOKEN": tok("not-the-one")}), nil,
			"refuses the token from this configuration"},
		{"a listener on every address and no public URL", with(map[string]string{"RETRYAUDIT_BASE_URL": "",
			"RETRYAUDIT_ADDR": "0.0.0.0:8080"}), nil, "say with --service-url where n8n reaches it"},
		{"n8n's editor URL for its API", with(nil), []string{"--n8n-url", f.URL}, "is not n8n's public API"},
		{"an unknown workflow", with(nil), []string{"--workflows", "abc,nope"}, `n8n has no workflow "abc"`},
		{"an argument that is not a flag", with(nil), []string{"all"}, "connect takes flags only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runConnect(t, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want it to say %q\n%s", err, tc.says, out)
			}
			if m := f.Mutations(); len(m) != 0 {
				t.Errorf("a refused connect wrote %v", m)
			}
		})
	}
	t.Run("the service's own key cannot read executions", func(t *testing.T) {
		f.SetScopes("credential:list", "credential:create", "workflow:list", "workflow:read", "workflow:create",
			"workflow:activate")
		defer f.SetScopes(n8ntest.AllScopes...)
		_, err := runConnect(t, with(nil))
		if err == nil || !strings.Contains(err.Error(), "lacks the scope execution:read") {
			t.Errorf("err = %v", err)
		}
		if m := f.Mutations(); len(m) != 0 {
			t.Errorf("a refused connect wrote %v", m)
		}
	})
}

func TestConnectNodeExample(t *testing.T) {
	f := n8ntest.NewFake(t)
	env := connectEnv(f, t.TempDir())
	svc := startService(t, env)
	env["RETRYAUDIT_BASE_URL"] = svc.URL

	t.Run("--with-example=node without the node installed says how to install it", func(t *testing.T) {
		out, err := runConnect(t, env, "--dry-run", "--with-example=node")
		if err == nil || !strings.Contains(err.Error(), "the retryaudit node (n8n-nodes-retryaudit) is not installed") ||
			!strings.Contains(err.Error(), "Settings → Community nodes") {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	t.Run("--with-example=node imports the node's template; --with-example alone the HTTP one", func(t *testing.T) {
		f.SetNode("folder")
		out, err := runConnect(t, env, "--dry-run", "--with-example=node")
		if err != nil || !strings.Contains(out, `import the example "Orders to CRM (with the retryaudit node)"`) ||
			strings.Contains(out, `"Orders to CRM (with retryaudit)"`) {
			t.Fatalf("%v\n%s", err, out)
		}
		out, err = runConnect(t, env, "--dry-run", "--with-example")
		if err != nil || !strings.Contains(out, `import the example "Orders to CRM (with retryaudit)"`) ||
			strings.Contains(out, "retryaudit node") {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, err := runConnect(t, env, "--dry-run", "--with-example=both"); err == nil ||
			!strings.Contains(err.Error(), "--with-example takes nothing, =http or =node") {
			t.Fatalf("err = %v", err)
		}
	})
}
