package n8n_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

func workflowNamed(f *n8ntest.Fake, name string) map[string]any {
	for _, w := range f.Workflows() {
		if w["name"] == name {
			return w
		}
	}
	return nil
}

const nodeExample = "Orders to CRM (with the retryaudit node)"

func TestWireTheNodeExample(t *testing.T) {
	want := n8n.Wiring{ServiceURL: serviceURL, Token: token, WithNodeExample: true}

	t.Run("a node that is not installed: connect says how to install it and changes nothing", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		_, err := plan(t, f, want)
		if err == nil || !strings.Contains(err.Error(), "the retryaudit node (n8n-nodes-retryaudit) is not installed") ||
			!strings.Contains(err.Error(), "Settings → Community nodes") || !strings.Contains(err.Error(), "N8N_CUSTOM_EXTENSIONS") {
			t.Fatalf("err = %v", err)
		}
	})

	for _, tc := range []struct {
		name, node string
		scopes     []string
		nodeType   string
	}{
		{"loaded from a folder (N8N_CUSTOM_EXTENSIONS): n8n names it CUSTOM", "folder", n8ntest.AllScopes, "CUSTOM.retryaudit"},
		{"a community package: n8n names it by its package", "package",
			append(slices.Clone(n8ntest.AllScopes), "communityPackage:list"), "n8n-nodes-retryaudit.retryaudit"},
		{"a community package the key cannot list: taken for a folder's", "package", n8ntest.AllScopes, "CUSTOM.retryaudit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := n8ntest.NewFake(t)
			f.SetNode(tc.node)
			f.SetScopes(tc.scopes...)
			p, err := plan(t, f, want)
			if err != nil {
				t.Fatal(err)
			}
			for _, says := range []string{`create the retryaudit API credential "retryaudit API" (http://retryaudit:8080, its token)`,
				`import the example "` + nodeExample + `" with the retryaudit node (` + tc.nodeType + `), not published`} {
				if !strings.Contains(whats(p), says) {
					t.Errorf("the plan does not say %q:\n%s", says, whats(p))
				}
			}
			if strings.Contains(whats(p), `"Orders to CRM (with retryaudit)"`) {
				t.Errorf("=node imports the HTTP template too:\n%s", whats(p))
			}
			if err := p.Apply(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if err := p.Watch(context.Background(), 0, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			data, cred, count := f.Credential("retryaudit API")
			if count != 1 || data["url"] != serviceURL || data["token"] != token {
				t.Errorf("%d credentials retryaudit API, data %v", count, data)
			}
			ex := workflowNamed(f, nodeExample)
			if ex == nil {
				t.Fatal("the node example is not in n8n")
			}
			ew := errorWorkflow(t, f)
			if ex["active"] == true || ex["settings"].(map[string]any)["errorWorkflow"] != ew["id"] {
				t.Errorf("the node example is published (%v) or reports elsewhere: %v", ex["active"], ex["settings"])
			}
			for _, name := range []string{"Claim event", "Report outcome"} {
				n := node(ex, name)
				c := n["credentials"].(map[string]any)["retryauditApi"].(map[string]any)
				if n["type"] != tc.nodeType || c["id"] != cred {
					t.Errorf("%s is a %v with credential %v, want %s with %s", name, n["type"], c, tc.nodeType, cred)
				}
			}

			again, err := plan(t, f, want)
			if err != nil || len(again.Changes) != 0 {
				t.Fatalf("a second run: %v:\n%s", err, whats(again))
			}
			if !strings.Contains(strings.Join(again.Kept, "\n"), "the node example") {
				t.Errorf("the second run does not say the node example is there: %v", again.Kept)
			}
		})
	}

	t.Run("a credential retryaudit API already there is given the address and token", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		f.SetNode("folder")
		id := f.AddCredential("retryaudit API", "retryauditApi", map[string]any{"url": "http://old:8080", "token": "old"})
		p := wire(t, f, want)
		if !strings.Contains(whats(p), `write retryaudit's address and token into the credential "retryaudit API" (`+id+`)`) {
			t.Errorf("plan:\n%s", whats(p))
		}
		if data, _, count := f.Credential("retryaudit API"); count != 1 || data["url"] != serviceURL || data["token"] != token {
			t.Errorf("%d credentials, data %v", count, data)
		}
	})

	t.Run("a credential retryaudit API of another type: refused, nothing changed", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		f.SetNode("folder")
		f.AddCredential("retryaudit API", "httpHeaderAuth", map[string]any{"name": "Authorization", "value": "x"})
		if _, err := plan(t, f, want); err == nil || !strings.Contains(err.Error(), "not a retryaudit API credential") {
			t.Fatalf("err = %v", err)
		}
	})
}
