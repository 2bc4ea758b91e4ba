//go:build n8n

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// The addresses the shipped workflows name, which a user edits to theirs.
const (
	shippedServiceURL = "http://127.0.0.1:8080"
	shippedCRMURL     = "https://crm.example.com/api"
)

// suite is what every run of the control steps shares: one n8n, set up
// once as the README says, the fakes, and where retryaudit will listen.
type suite struct {
	n8n        *n8n
	crm        *fakeCRM
	slack      *fakeSlack
	bin        string
	serviceURL string
	token      string
	orders     workflow // n8n/orders-to-crm.json, for the source shop
	market     workflow // a copy for a second sender, as a user makes one
	errors     workflow // n8n/error-workflow.json
	feed       workflow // a polling trigger that fails, to see a trigger error
	// n8n's execution hooks (n8n/retryaudit-hooks.js) report to the
	// service through tap, with hookToken.
	tap       *hookTap
	hookToken string
	plain     workflow // a webhook that succeeds without the service
	fails     workflow // a webhook that fails without the service
	// extra returns the steps a control run adds after the control steps.
	extra func(*run) []step
	// env adds to the service's variables.
	env map[string]string
}

// TestRealN8N wires retryaudit into a real n8n with retryaudit connect
// alone (or by the README's manual steps, with
// RETRYAUDIT_TEST_N8N_WIRING=by-hand), its execution hooks included, and
// runs the control steps through n8n's webhooks and public API, then the
// hooks' steps, once with retryaudit on its SQLite default and once on
// PostgreSQL.
func TestRealN8N(t *testing.T) {
	began := time.Now()
	home := os.Getenv("RETRYAUDIT_TEST_N8N_HOME")
	if home == "" {
		t.Fatal("RETRYAUDIT_TEST_N8N_HOME is unset: run make test-n8n, which installs n8n and sets it")
	}
	s := &suite{crm: newFakeCRM(t), slack: newFakeSlack(t), bin: buildService(t), token: randomToken(),
		hookToken: randomToken(), extra: (*run).hookSteps}
	s.serviceURL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	s.tap = newHookTap(t, s.serviceURL)
	s.n8n = startN8NWith(t, home, n8nConfig{Env: hooksEnv(t, s.tap, s.hookToken)})
	byHand := os.Getenv("RETRYAUDIT_TEST_N8N_WIRING") == "by-hand"
	if byHand {
		s.wire(t) // the README's manual steps, the fallback to connect
	} else {
		s.wireWithConnect(t)
	}
	s.wireHooks(t)
	t.Logf("timing: n8n started and wired in %s", time.Since(began).Round(time.Second))

	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			start := time.Now()
			s.controlRun(t, backend)
			t.Logf("timing: the control run on %s took %s", backend, time.Since(start).Round(time.Second))
		})
	}
	if !byHand {
		t.Run("connect again after the control runs: nothing to change", s.connectAgain)
	}
	t.Logf("timing: TestRealN8N took %s", time.Since(began).Round(time.Second))
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "e2e-" + hex.EncodeToString(b)
}

// shipped reads a workflow of n8n/ and changes only its URLs to ours, as a
// user edits them (every one the file holds must be found).
func shipped(t *testing.T, name string, replace map[string]string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "n8n", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for from, to := range replace {
		if !strings.Contains(s, from) {
			t.Fatalf("n8n/%s does not contain %q, which the README tells users to change", name, from)
		}
		s = strings.ReplaceAll(s, from, to)
	}
	return []byte(s)
}

// wire does by hand what "Wiring it into n8n" tells a user to do when
// connect cannot, in order.
func (s *suite) wire(t *testing.T) {
	n := s.n8n
	n.setUp(t)
	// 1. The credential.
	n.api(t, "POST", "/credentials", map[string]any{"name": "retryaudit", "type": "httpHeaderAuth",
		"data": map[string]any{"name": "Authorization", "value": "Bearer " + s.token}}, http.StatusOK, nil)
	// 2 and 3. The two workflows, their URLs changed to ours.
	urls := map[string]string{shippedServiceURL: s.serviceURL}
	s.errors = n.importWorkflow(t, shipped(t, "error-workflow.json", urls))
	urls[shippedCRMURL] = s.crm.api()
	orders := shipped(t, "orders-to-crm.json", urls)
	s.orders = n.importWorkflow(t, orders)
	s.market = n.importWorkflow(t, secondSender(t, orders))
	// 4. Settings → Error workflow.
	for _, w := range []workflow{s.orders, s.market} {
		n.setErrorWorkflow(t, w.ID, s.errors.ID)
	}
	// 5. Publish both (and the second sender's copy).
	for _, w := range []workflow{s.errors, s.orders, s.market} {
		n.publish(t, w.ID)
	}
	s.feed = n.importWorkflow(t, failingFeed(t, s.crm.URL+"/rss"))
	n.setErrorWorkflow(t, s.feed.ID, s.errors.ID)
}

// secondSender is the orders workflow copied for another sender, as a user
// adds one: another name, webhook path and source in the Event node.
func secondSender(t *testing.T, orders []byte) []byte {
	t.Helper()
	s := string(orders)
	for from, to := range map[string]string{
		`"name": "Orders to CRM (with retryaudit)"`:           `"name": "Orders to CRM (marketplace)"`,
		`"path": "orders"`:                                    `"path": "market-orders"`,
		`"webhookId": "7f1c5d52-8a0e-4a3e-9d39-3c1a5b0e8f11"`: `"webhookId": "7f1c5d52-8a0e-4a3e-9d39-3c1a5b0e8f12"`,
		`const SOURCE = 'shop';`:                              `const SOURCE = 'market';`,
	} {
		if !strings.Contains(s, from) {
			t.Fatalf("the orders workflow has no %s to change for a second sender", from)
		}
		s = strings.Replace(s, from, to, 1)
	}
	return []byte(s)
}

// failingFeed is a workflow whose polling trigger reads a feed that fails
// after its first read: n8n reports the trigger's failure to the error
// workflow without an execution.
func failingFeed(t *testing.T, feedURL string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"name": "Feed that fails",
		"nodes": []any{map[string]any{
			"id": "5e7a0000-0000-4000-8000-0000000000f1", "name": "RSS Feed Trigger",
			"type": "n8n-nodes-base.rssFeedReadTrigger", "typeVersion": 1, "position": []int{0, 0},
			"parameters": map[string]any{"pollTimes": map[string]any{"item": []any{map[string]any{"mode": "everyMinute"}}},
				"feedUrl": feedURL},
		}},
		"connections": map[string]any{},
		"settings":    map[string]any{"executionOrder": "v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startService starts retryaudit for one run: a fresh data folder, the
// database (the SQLite default, or a fresh PostgreSQL schema dropped after),
// n8n's API for lineage and reconciliation, and the fakes.
func (s *suite) startService(t *testing.T, backend string) *service {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{
		"RETRYAUDIT_ADDR":                strings.TrimPrefix(s.serviceURL, "http://"),
		"RETRYAUDIT_TOKEN":               s.token,
		"RETRYAUDIT_HOOK_TOKEN":          s.hookToken,
		"RETRYAUDIT_DATA_DIR":            dir,
		"RETRYAUDIT_N8N_EDITOR_URL":      s.n8n.URL,
		"RETRYAUDIT_N8N_API_URL":         s.n8n.URL + "/api/v1",
		"RETRYAUDIT_N8N_API_KEY":         s.n8n.APIKey,
		"RETRYAUDIT_N8N_POLL":            "2s",
		"RETRYAUDIT_N8N_RECONCILE_GRACE": "15s",
		"RETRYAUDIT_SLACK_BOT_TOKEN":     "xoxb-e2e",
		"RETRYAUDIT_SLACK_CHANNEL":       "C0RETRYAUDIT",
		"RETRYAUDIT_SLACK_API_URL":       s.slack.URL + "/api",
		"RETRYAUDIT_CRM_LINKS": "shop=" + s.crm.URL + "/orders?external_id={source}:{event_id}," +
			"market=" + s.crm.URL + "/orders?external_id={source}:{event_id}",
	}
	if backend == "postgres" {
		env["RETRYAUDIT_DATABASE_URL"] = audittest.URL(t, "postgres")
	}
	for k, v := range s.env {
		env[k] = v
	}
	return startService(t, s.bin, env)
}
