package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	gitleaks "github.com/zricethezav/gitleaks/v8/config"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/n8n/rules"
	"github.com/retryaudit/retryaudit/n8n/rules/rulestest"
)

// slackRecorder is a fake Slack Web API that keeps every form it received.
type slackRecorder struct {
	mu    sync.Mutex
	forms []string
	seq   int
}

func (f *slackRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(raw))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	var b strings.Builder
	for k, vs := range form {
		b.WriteString(k + "=" + strings.Join(vs, ",") + "\n")
	}
	f.forms = append(f.forms, r.URL.Path+"\n"+b.String())
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C1", "ts": fmt.Sprintf("1700000000.%06d", f.seq),
		"user": "bot", "team": "t"})
}

func (f *slackRecorder) all() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.forms, "\n")
}

// planted are credentials hidden where n8n 2.41.1 puts what a failed node
// sent, received and was configured with: each must be found nowhere.
var planted = []struct {
	secret string
	plant  func(v map[string]any, s string)
}{
	{"sk-live-aaaaaaaaaaaaaaaa01", func(v map[string]any, s string) { req(v)["headers"].(map[string]any)["Authorization"] = "Bearer " + s }},
	{"apim0123456789secret02", func(v map[string]any, s string) {
		req(v)["headers"].(map[string]any)["Ocp-Apim-Subscription-Key"] = s
	}},
	{"plain-looking-value-03", func(v map[string]any, s string) { req(v)["headers"].(map[string]any)["X-Shop-Sig"] = s }},
	{"hdr-param-secret-04", func(v map[string]any, s string) {
		hp := node(v)["headerParameters"].(map[string]any)
		hp["parameters"] = append(hp["parameters"].([]any), map[string]any{"name": "X-Api-Token", "value": s})
	}},
	{"body-pass-05", func(v map[string]any, s string) { req(v)["body"].(map[string]any)["pass"] = s }},
	{"form-secret-06", func(v map[string]any, s string) { req(v)["form"] = "grant_type=x&client_secret=" + s + "&scope=y" }},
	{"uri-pw-07", func(v map[string]any, s string) { req(v)["uri"] = "https://crm:" + s + "@crm.example.com/orders" }},
	{"query-key-08", func(v map[string]any, s string) { node(v)["url"] = "https://crm.example.com/o?id=1&api_key=" + s }},
	{"msg-token-09abcdef", func(v map[string]any, s string) {
		errObj(v)["message"] = "401 - Authorization: Bearer " + s + " was refused"
	}},
	{"desc-token-10", func(v map[string]any, s string) {
		errObj(v)["description"] = `{\"error\": \"bad\", \"access_token\": \"` + s + `\"}`
	}},
	{"colon-bearer-11", func(v map[string]any, s string) { errObj(v)["messages"] = []any{"500 - Bearer: " + s} }},
	{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig12abc", func(v map[string]any, s string) {
		errObj(v)["stack"] = errObj(v)["stack"].(string) + "\n session " + s
	}},
	{"xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQr13", func(v map[string]any, s string) { node(v)["jsonBody"] = `={"t": "` + s + `"}` }},
	{"ghp_abcdefghijklmnopqrstuvwxyz0123456714", func(v map[string]any, s string) {
		errObj(v)["description"] = "clone of https://" + s + "@github.com/x/y failed"
	}},
	{"jwt-value-15", func(v map[string]any, s string) { req(v)["body"].(map[string]any)["jwt"] = s }},
	{"auth-obj-16", func(v map[string]any, s string) { req(v)["auth"] = map[string]any{"user": "crm", "pass": s} }},
	{"cookie-value-17", func(v map[string]any, s string) {
		errObj(v)["description"] = "the CRM said: Cookie: lang=en; sid=" + s
	}},
	{"sess-18", func(v map[string]any, s string) { req(v)["body"].(map[string]any)["session_id"] = s }},
	{"424242", func(v map[string]any, s string) { req(v)["body"].(map[string]any)["password"] = json.Number(s) }},
	{"Zq8XbT2mLw9VnR4kHs7YdP3cFg6J20", func(v map[string]any, s string) { errObj(v)["message"] = "upstream key " + s }},
	{"dXNlcjpwYXNzd29yZDIx", func(v map[string]any, s string) { errObj(v)["message"] = "refused (Basic " + s + ")" }},
	{"n8n-url-pw-22", func(v map[string]any, s string) {
		v["execution"].(map[string]any)["url"] = "https://admin:" + s + "@n8n.example/workflow/w/executions/1"
	}},
	{"T0/B0/hookSecret23", func(v map[string]any, s string) {
		errObj(v)["message"] = "posting to https://hooks.slack.com/services/" + s + " failed"
	}},
	{"wf-name-secret-24", func(v map[string]any, s string) {
		v["workflow"].(map[string]any)["name"] = "Lab Main Workflow api_key=" + s
	}},
	{"node-name-secret-25", func(v map[string]any, s string) {
		v["execution"].(map[string]any)["lastNodeExecuted"] = "Fail Step token=" + s
		errObj(v)["node"].(map[string]any)["name"] = "Fail Step token=" + s
	}},
	{"raw-header-value-26", func(v map[string]any, s string) {
		errObj(v)["context"].(map[string]any)["response"] = map[string]any{
			"rawHeaders": []any{"Content-Type", "application/json", "X-Shop-Account", s}}
	}},
	// The shapes that passed the pattern list before gitleaks' rules and
	// the structural pass replaced it (issue 19).
	{"ak-apikey-scheme-27", func(v map[string]any, s string) {
		errObj(v)["message"] = "401 - Authorization: ApiKey " + s + " was refused"
	}},
	{"5c1f0a9e-3b2d-4c7e-9f10-2a3b4c5d6e28", func(v map[string]any, s string) {
		errObj(v)["description"] = `request headers {"Authorization": "GenieKey ` + s + `"}`
	}},
	{"passphrase-value-29", func(v map[string]any, s string) { errObj(v)["message"] = "ssh: passphrase=" + s + " rejected" }},
	{"appkey-value-30", func(v map[string]any, s string) { node(v)["url"] = "https://api.example/v2/items?id=4&appkey=" + s }},
	{"dbl-esc-pass-31", func(v map[string]any, s string) {
		errObj(v)["messages"] = []any{`500 - "{\\\"user\\\":\\\"crm\\\",\\\"password\\\":\\\"` + s + `\\\"}"`}
	}},
	{"proxy-pw-32", func(v map[string]any, s string) {
		errObj(v)["description"] = "tunnel via //crm:" + s + "@proxy.internal:3128 failed"
	}},
	{"mysql-pw-33", func(v map[string]any, s string) {
		errObj(v)["message"] = "dial app:" + s + "@tcp(db.internal:3306)/shop: refused"
	}},
	{"ruby-hash-pw-34", func(v map[string]any, s string) {
		req(v)["body"].(map[string]any)["note"] = `{:user=>"crm", :password=>"` + s + `"}`
	}},
	{"curl-pw-35", func(v map[string]any, s string) {
		node(v)["curlImport"] = "curl -s -u admin:" + s + " https://crm.example/api"
	}},
	{"str-hdr-secret-36", func(v map[string]any, s string) {
		req(v)["headers"] = "Accept: */*\r\nX-Shop-Token: " + s + "\r\nUser-Agent: n8n"
	}},
	{"sk_live_4eC39HqLyjWDarjtT1zdp737", func(v map[string]any, s string) {
		errObj(v)["context"].(map[string]any)[s] = map[string]any{"status": 401}
	}},
	{"qs-pair-key-38", func(v map[string]any, s string) { req(v)["qs"] = []any{[]any{"api_key", s}, []any{"page", "2"}} }},
}

func errObj(v map[string]any) map[string]any {
	return v["execution"].(map[string]any)["error"].(map[string]any)
}
func req(v map[string]any) map[string]any {
	return errObj(v)["context"].(map[string]any)["request"].(map[string]any)
}
func node(v map[string]any) map[string]any {
	return errObj(v)["node"].(map[string]any)["parameters"].(map[string]any)
}

// TestPlantedSecretsLeakNowhere posts n8n errors with 38 planted
// credentials and one sample of gitleaks' test corpus per rule (and claims'
// workflow and node names, an outcome reason and a trigger error with more)
// to a running service, lets the outbox send its alerts to a fake Slack,
// then reads every API answer, every page (the overview and the alerts'
// short links too), /metrics, every row of the database, every message
// Slack received and every line the service logged: none of the secrets
// may be in any of them, plain or escaped.
func TestPlantedSecretsLeakNowhere(t *testing.T) {
	for _, dialect := range audittest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			slack := &slackRecorder{}
			fake := httptest.NewServer(slack)
			defer fake.Close()
			env := map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-test", "RETRYAUDIT_SLACK_CHANNEL": "C1",
				"RETRYAUDIT_SLACK_API_URL": fake.URL}
			dbURL := ""
			if dialect == "postgres" {
				dbURL = audittest.URL(t, "postgres")
				env["RETRYAUDIT_DATABASE_URL"] = dbURL
			}
			svc := startService(t, env)
			if dbURL == "" {
				dbURL = "sqlite:" + svc.DataDir + "/retryaudit.db"
			}
			raw, err := os.ReadFile("../../handlers/testdata/payloads/error-01-first-delivery.json")
			if err != nil {
				t.Fatal(err)
			}
			secrets := []string{"reason-api-key-91", "trigger-token-92", "claim-wf-secret-93", "claim-node-secret-94"}
			// gitleaks' own corpus: one sample per rule, in the stored
			// payload of each event's error, a few also in its message.
			corpus := corpusSample(t)
			var answers []string
			// Three events, each failing with a third of the secrets.
			for e := range 3 {
				exec := fmt.Sprint(900 + e)
				event := fmt.Sprintf("sec-%d", e)
				code, out := svc.api(t, "POST", "/v1/claims", fmt.Sprintf(
					`{"source":"shop","event_id":%q,"execution_id":%q,"workflow_id":"LabMainWorkflow1",`+
						`"workflow_name":"Orders password=claim-wf-secret-93","node":"Claim (Bearer claim-node-secret-94)"}`, event, exec))
				if code != http.StatusOK {
					t.Fatalf("claim: %d %s", code, out)
				}
				var v map[string]any
				dec := json.NewDecoder(strings.NewReader(string(raw)))
				dec.UseNumber()
				dec.Decode(&v)
				v["execution"].(map[string]any)["id"] = exec
				for i := e; i < len(planted); i += 3 {
					planted[i].plant(v, planted[i].secret)
					secrets = append(secrets, planted[i].secret)
				}
				var texts []any
				for i := e; i < len(corpus); i += 3 {
					texts = append(texts, corpus[i].Text)
					secrets = append(secrets, corpus[i].Secrets...)
				}
				errObj(v)["context"].(map[string]any)["gitleaks corpus"] = texts
				errObj(v)["description"] = fmt.Sprint(errObj(v)["description"], " ", texts[0], " ", texts[1])
				body, _ := json.Marshal(v)
				code, out = svc.api(t, "POST", "/v1/n8n/errors", string(body))
				if code != http.StatusAccepted {
					t.Fatalf("error intake: %d %s", code, out)
				}
				answers = append(answers, out)
			}
			for _, call := range []struct{ path, body string }{
				{"/v1/outcomes", `{"source":"shop","event_id":"sec-0","execution_id":"900","workflow_id":"LabMainWorkflow1","outcome":"unknown",
					"reason":"CRM timed out; retry with api_key=reason-api-key-91"}`},
				{"/v1/n8n/errors", `{"trigger":{"mode":"trigger","error":{}},"workflow":{"id":"poll"},
					"message":"GET https://feed.example/x?token=trigger-token-92 failed"}`},
			} {
				code, out := svc.api(t, "POST", call.path, call.body)
				if code >= 300 {
					t.Fatalf("%s: %d %s", call.path, code, out)
				}
				answers = append(answers, out)
			}

			waitForOutbox(t, dialect, dbURL)
			if !strings.Contains(slack.all(), "chat.postMessage") {
				t.Fatal("Slack received no message: the test would see no leak there")
			}

			paths := []string{"/v1/events", "/v1/events?status=processing", "/v1/stats", "/v1/stats?source=shop", "/metrics"}
			pages := []string{"/", "/overview", "/overview?source=shop", "/review", "/errors", "/errors?kind=trigger_error",
				"/executions/900"}
			for e := range 3 {
				paths = append(paths, fmt.Sprintf("/v1/events/shop/sec-%d", e))
				pages = append(pages, fmt.Sprintf("/events/shop/sec-%d", e))
			}
			for id := 1; id <= 4; id++ {
				pages = append(pages, fmt.Sprintf("/errors/%d", id))
			}
			for _, p := range paths {
				code, out := svc.api(t, "GET", p, "")
				if code != http.StatusOK {
					t.Errorf("%s: %d", p, code)
				}
				answers = append(answers, out)
			}
			for _, p := range pages {
				answers = append(answers, svc.page(t, p))
			}
			// Slack's buttons link the alerts' short links: the redirect, and
			// the page it leads to.
			var alerts []int64
			if err := openDB(t, dialect, dbURL).Select(&alerts, `SELECT id FROM outbox WHERE source <> '' ORDER BY id`); err != nil {
				t.Fatal(err)
			}
			if len(alerts) == 0 {
				t.Fatal("no alert about an event: the test would follow no short link")
			}
			for _, id := range alerts {
				answers = append(answers, svc.shortLink(t, id)...)
			}
			places := map[string]string{
				"the API answers and pages": strings.Join(answers, "\n"),
				"the database":              dumpDatabase(t, dialect, dbURL),
				"Slack":                     slack.all(),
				"the service's log":         svc.Output.String(),
			}
			for where, text := range places {
				for _, s := range secrets {
					if strings.Contains(text, s) || strings.Contains(text, url.QueryEscape(s)) ||
						strings.Contains(text, jsonEscape(s)) || strings.Contains(text, html.EscapeString(s)) ||
						strings.Contains(text, jsonEscape(jsonEscape(s))) {
						t.Errorf("%s holds %s", where, s)
					}
				}
			}
			if !strings.Contains(places["the API answers and pages"], "evt-lab-0001") {
				t.Error("the pages lost what is no secret (the request body's event id)")
			}
		})
	}
}

// corpusSample returns one sample of gitleaks' test corpus per rule, of
// secrets long enough not to be found by chance.
func corpusSample(t *testing.T) []rulestest.Sample {
	all, err := rules.Load(gitleaks.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []rulestest.Sample
	for _, c := range rulestest.Corpus(t, all, 1) {
		if seen[c.Rule] || len(c.Text) > 400 || slices.ContainsFunc(c.Secrets, func(s string) bool { return len(s) < 12 }) {
			continue
		}
		seen[c.Rule] = true
		out = append(out, c)
	}
	if len(out) < 150 {
		t.Fatalf("%d rules in the corpus sample", len(out))
	}
	return out
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

// page reads one of the service's pages as its generated admin.
func (s *service) page(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+s.Password)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: %d", path, resp.StatusCode)
	}
	return string(raw)
}

// shortLink follows /e/{id} as its generated admin: the redirect's
// Location and body, then the page it leads to.
func (s *service) shortLink(t *testing.T, id int64) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/e/%d", s.URL, id), nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+s.Password)))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	where := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(where, "/events/") {
		t.Errorf("/e/%d: %d to %q", id, resp.StatusCode, where)
		return []string{string(raw)}
	}
	return []string{where, string(raw), s.page(t, where)}
}

func openDB(t *testing.T, dialect, dbURL string) *sqlx.DB {
	t.Helper()
	driver, dsn := "postgres", dbURL
	if dialect == "sqlite" {
		driver, dsn = "sqlite", strings.TrimPrefix(dbURL, "sqlite:")
	}
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// waitForOutbox waits until the outbox has sent what it holds.
func waitForOutbox(t *testing.T, dialect, dbURL string) {
	t.Helper()
	db := openDB(t, dialect, dbURL)
	for start := time.Now(); time.Since(start) < 2*time.Minute; time.Sleep(200 * time.Millisecond) {
		var open int
		if err := db.Get(&open, `SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')`); err == nil && open == 0 {
			return
		}
	}
	t.Fatal("the outbox did not empty")
}

var tableName = regexp.MustCompile(`^[a-z0-9_]+$`)

// dumpDatabase returns every value of every table, as text.
func dumpDatabase(t *testing.T, dialect, dbURL string) string {
	t.Helper()
	db := openDB(t, dialect, dbURL)
	var b strings.Builder
	for _, table := range []string{"webhook_events", "event_items", "executions", "event_executions", "event_history",
		"n8n_errors", "outbox", "slack_threads", "service_state", "job_leases", "alert_groups", "stats_hourly",
		"stats_daily", "resolution_times"} {
		if !tableName.MatchString(table) {
			t.Fatal(table)
		}
		rows, err := db.Queryx("SELECT * FROM " + table)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		n := 0
		for rows.Next() {
			row := map[string]any{}
			if err := rows.MapScan(row); err != nil {
				t.Fatal(err)
			}
			for k, v := range row {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s.%s=%v\n", table, k, v)
			}
			n++
		}
		rows.Close()
		if table == "n8n_errors" && n < 4 {
			t.Fatalf("%d errors stored, want 4", n)
		}
	}
	return b.String()
}
