package n8n_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

// payloadDir holds the bodies captured from a real n8n 2.41.1.
const payloadDir = "../handlers/testdata/payloads"

func realPayload(t testing.TB, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(payloadDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// at walks a decoded payload to the map at path.
func at(t *testing.T, v map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, p := range path {
		next, ok := v[p].(map[string]any)
		if !ok {
			t.Fatalf("no object at %v", path)
		}
		v = next
	}
	return v
}

// The captured shapes of n8n 2.41.1 errors the table plants into, and what
// of each must stay readable.
const (
	httpNode = "error-01-first-delivery.json"     // an HTTP Request node's failure
	codeNode = "error-09-code-node-throw.json"    // a Code node that threw
	trigger  = "error-10-trigger-poll-error.json" // a polling trigger's failure
)

var keptOf = map[string][]string{
	httpNode: {"evt-lab-0001", "The service was not able to process your request", "Fail Step",
		"http://127.0.0.1:15678/workflow/LabMainWorkflow1/executions/2", "LabMainWorkflow1", "application/json",
		`"sendCredentialsOnCrossOriginRedirect":true`, "HttpRequestV3.node.ts:892:16", `"authentication":"none"`},
	codeNode: {"lab: deliberate failure in Code node for event evt-lab-code-1", "Throw In Code", "LabCodeThrowWf01",
		"Lab Code Throw Workflow", "Code.node.ts:219:8", "WrappedExecutionError", `"triggerNode":{"name":"Webhook"`},
	trigger: {"RSS Feed Trigger", "n8n-nodes-base.rssFeedReadTrigger", "everyMinute", "LabTrigErrWflow1",
		"Lab Trigger Error Workflow", "127.0.0.1:18999/rss-flaky", "NodeOperationError"},
}

// TestRedactRealShapes plants credentials where n8n 2.41.1 puts what a
// failed node sent, received, threw and was configured with, in the shapes
// it was captured in (an HTTP Request node, a Code node, a polling
// trigger), and checks that none survive while the fields people need do.
func TestRedactRealShapes(t *testing.T) {
	tests := []struct {
		payload string
		name    string
		secret  string
		plant   func(t *testing.T, v map[string]any, secret string)
	}{
		{httpNode, "an Authorization request header", "sk-live-aaaaaaaaaaaaaaaa1", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request", "headers")["Authorization"] = "Bearer " + s
		}},
		{httpNode, "a subscription key header no list knows", "0123456789abcdefsub2", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request", "headers")["Ocp-Apim-Subscription-Key"] = s
		}},
		{httpNode, "a custom header", "plain-looking-value-3", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request", "headers")["X-Shop-Signature-V2"] = s
		}},
		{httpNode, "a header parameter of the node", "hdr-param-secret-4", func(t *testing.T, v map[string]any, s string) {
			hp := at(t, v, "execution", "error", "node", "parameters", "headerParameters")
			hp["parameters"] = append(hp["parameters"].([]any), map[string]any{"name": "X-Api-Token", "value": s})
		}},
		{httpNode, "a password in the request body", "body-pass-5", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request", "body")["pass"] = s
		}},
		{httpNode, "a client secret in a form body", "form-secret-6", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request")["body"] = "event_id=evt-lab-0001&grant_type=client_credentials&client_secret=" + s + "&scope=x"
		}},
		{httpNode, "user:password in the URI without a query", "uri-pw-7", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request")["uri"] = "https://crm:" + s + "@crm.example.com/orders"
		}},
		{httpNode, "an api_key in the node's URL", "query-key-8", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "node", "parameters")["url"] = "https://crm.example.com/o?id=1&api_key=" + s
		}},
		{httpNode, "a bearer token quoted in the message", "msg-token-9abcdef", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["message"] = "401 - Authorization: Bearer " + s + " was refused"
		}},
		{httpNode, "a token in the description's escaped JSON", "desc-token-10", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["description"] = `{\"error\": \"bad\", \"access_token\": \"` + s + `\"}`
		}},
		{httpNode, "Bearer with a colon", "colon-11", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["messages"] = []any{"500 - Bearer: " + s}
		}},
		{httpNode, "a JWT in the stack", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig12abc", func(t *testing.T, v map[string]any, s string) {
			e := at(t, v, "execution", "error")
			e["stack"] = e["stack"].(string) + "\n    session " + s
		}},
		{httpNode, "a Slack token in a Code node's parameters", "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "node", "parameters")["jsonBody"] = `={"text": "hi", "channel": "C1", "t": "` + s + `"}`
		}},
		{httpNode, "a GitHub token in free text", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["message"] = "clone failed for https://" + s + "@github.com/x/y"
		}},
		{httpNode, "a jwt key", "jwt-value-15", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request", "body")["jwt"] = s
		}},
		{httpNode, "an auth object", "auth-obj-16", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request")["auth"] = map[string]any{"user": "crm", "pass": s}
		}},
		{httpNode, "a cookie header in the message", "cookie-17", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["description"] = "Cookie: lang=en; sid=" + s
		}},
		{httpNode, "a session key", "sess-18", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request", "body")["session_id"] = s
		}},
		{httpNode, "a numeric password", "424242", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request", "body")["password"] = json.Number(s)
		}},
		{httpNode, "a high-entropy key nobody named", "Zq8XbT2mLw9VnR4kHs7YdP3cFg6J", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["description"] = "upstream said: " + s
		}},
		{httpNode, "a Basic credential in a trigger error", "dXNlcjpwYXNzd29yZDIx", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["message"] = "Authorization failed (Basic " + s + ")"
		}},
		{httpNode, "an API key in the response's rawHeaders", "raw-hdr-key-22", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context")["response"] = map[string]any{"statusCode": json.Number("500"),
				"rawHeaders": []any{"Content-Type", "application/json", "X-Api-Key", s, "Date", "Tue, 01 Dec 2026 09:00:00 GMT"}}
		}},
		{httpNode, "a header no name gives away, as a line", "plain-line-value-23", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error", "context", "request")["rawHeaders"] = []any{"Accept: application/json", "X-Shop-Account: " + s}
		}},
		{codeNode, "a token the Code node's message quotes", "code-msg-token-24", func(t *testing.T, v map[string]any, s string) {
			e := at(t, v, "execution", "error")
			e["message"] = "CRM refused access_token=" + s + " for event evt-lab-code-1 [line 1]"
			e["stack"] = "WrappedExecutionError: " + e["message"].(string) + "\n" + e["stack"].(string)
		}},
		{codeNode, "a password in the thrown object's description", "code-desc-pw-25", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["description"] = `{"db": "postgres://app:` + s + `@db.internal:5432/crm"}`
		}},
		{codeNode, "a key in a helper request's headers", "code-helper-key-26", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution", "error")["context"] = map[string]any{"request": map[string]any{
				"method": "POST", "headers": map[string]any{"X-Shop-Key": s, "content-type": "application/json"}}}
		}},
		{codeNode, "a bearer token in the node's name", "code-node-name-27", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "execution")["lastNodeExecuted"] = "Throw In Code with Bearer " + s
		}},
		{codeNode, "an API key in the workflow's name", "wf-name-key-28", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "workflow")["name"] = "Lab Code Throw Workflow api_key=" + s
		}},
		{trigger, "user:password in the feed URL", "feed-pw-29", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "trigger", "error", "node", "parameters")["feedUrl"] = "http://feed:" + s + "@127.0.0.1:18999/rss-flaky"
		}},
		{trigger, "a token in the feed URL's query", "feed-token-30", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "trigger", "error", "node", "parameters")["feedUrl"] = "http://127.0.0.1:18999/rss-flaky?token=" + s
		}},
		{trigger, "a bearer token in the message the error workflow adds", "trig-msg-31abcdef", func(t *testing.T, v map[string]any, s string) {
			v["message"] = "GET /rss-flaky answered 401 (Authorization: Bearer " + s + ")"
		}},
		{trigger, "a header the feed server answered", "trig-cookie-32", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "trigger", "error", "context")["response"] = map[string]any{
				"rawHeaders": []any{"Set-Cookie", "sid=" + s + "; HttpOnly", "Content-Type", "application/rss+xml"}}
		}},
		{trigger, "a credential in the node's parameters", "trig-param-33", func(t *testing.T, v map[string]any, s string) {
			at(t, v, "trigger", "error", "node", "parameters")["options"] = map[string]any{"customHeaders": map[string]any{
				"headers": []any{map[string]any{"name": "X-Feed-Auth", "value": s}}}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := realPayload(t, tc.payload)
			tc.plant(t, v, tc.secret)
			out, err := json.Marshal(n8n.Redact(v))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), tc.secret) {
				t.Errorf("%s survived:\n%s", tc.secret, out)
			}
			for _, kept := range keptOf[tc.payload] {
				if !strings.Contains(string(out), kept) {
					t.Errorf("%q was lost", kept)
				}
			}
			// What the store keeps beside the payload: the summary fields.
			raw, _ := json.Marshal(v)
			r := n8n.ParseErrorTrigger(raw, v)
			if summary := r.Message + r.URL + r.WorkflowName + r.Node; strings.Contains(summary, tc.secret) {
				t.Errorf("%s survived in the summary: %q", tc.secret, summary)
			}
		})
	}
}

// TestRedactHeaderLists: headers listed as strings keep a value only after
// an allow-listed name, whether names and values alternate (Node's
// rawHeaders) or each is one line.
func TestRedactHeaderLists(t *testing.T) {
	tests := []struct{ in, want []any }{
		{[]any{"Content-Type", "application/json", "X-Api-Key", "abc123", "Location", "https://h.example/?token=t1"},
			[]any{"Content-Type", "application/json", "X-Api-Key", n8n.Redacted, "Location", "https://h.example/?token=" + n8n.Redacted}},
		{[]any{"accept: */*", "X-Shop-Account:  plain1", "Authorization:Bearer x"},
			[]any{"accept: */*", "X-Shop-Account:  " + n8n.Redacted, "Authorization:" + n8n.Redacted}},
		{[]any{"X-Api-Key", "abc123", "Accept"}, []any{"X-Api-Key", n8n.Redacted, "Accept"}},
		{[]any{"Accept", ""}, []any{"Accept", ""}},
	}
	for _, tc := range tests {
		got := n8n.Redact(map[string]any{"rawHeaders": tc.in}).(map[string]any)["rawHeaders"]
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Redact(%q)\n  = %q\n want %q", tc.in, got, tc.want)
		}
		if again := n8n.Redact(map[string]any{"rawHeaders": got}).(map[string]any)["rawHeaders"]; !reflect.DeepEqual(again, got) {
			t.Errorf("not idempotent: %q → %q", got, again)
		}
	}
}

func TestRedactDoesNotChangeItsInput(t *testing.T) {
	v := realPayload(t, "error-01-first-delivery.json")
	at(t, v, "execution", "error", "context", "request", "headers")["authorization"] = "Bearer x-123456"
	n8n.Redact(v)
	if at(t, v, "execution", "error", "context", "request", "headers")["authorization"] != "Bearer x-123456" {
		t.Error("Redact changed its input")
	}
}

func TestRedactText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Authorization: Bearer abc.def-123", "Authorization: Bearer [redacted]"},
		{"Bearer: x", "Bearer: [redacted]"},
		{"https://user:pw@host.example/path", "https://user:[redacted]@host.example/path"},
		{"https://user:p@ss@host.example", "https://user:[redacted]@host.example"},
		{"https://h.example/o?api_key=k1&id=7", "https://h.example/o?api_key=[redacted]&id=7"},
		{"client_id=app&client_secret=s3&grant_type=x", "client_id=app&client_secret=[redacted]&grant_type=x"},
		{`{"password": "p", "user": "bob"}`, `{"password": "[redacted]", "user": "bob"}`},
		{`{\"token\": \"t\", \"seq\": 4}`, `{\"token\": \"[redacted]\", \"seq\": 4}`},
		{"Error: password=hunter2", "Error: password=[redacted]"},
		{"X-API-Key: k-9", "X-API-Key: [redacted]"},
		{"Cookie: a=1; sid=2", "Cookie: [redacted]"},
		{"https://hooks.slack.com/services/T0/B0/XyZ", "https://hooks.slack.com/services/[redacted]"},
		{"key sk_live_4eC39HqLyjWDarjtT1zdp7dc used", "key [redacted] used"},
		{`"auth": null, "pass": ""`, `"auth": null, "pass": ""`},
		// Bytes that lowercase to another length before the scheme word
		// (an invalid byte, "İ") leave its index where it was.
		{"\xff\xfe\xfd Bearer abcdefghijklmnopqrstu", "\xff\xfe\xfd Bearer [redacted]"},
		{"İİİ Bearer abcdefghijklmnopqrstu", "İİİ Bearer [redacted]"},
		{"\xd5\xd2\xfc\xefBearer", "\xd5\xd2\xfc\xefBearer"}, // found by FuzzRedactText: it panicked
		// What must stay.
		{"The service was not able to process your request", "The service was not able to process your request"},
		{"at ExecuteContext.execute (HttpRequestV3.node.ts:892:16)", "at ExecuteContext.execute (HttpRequestV3.node.ts:892:16)"},
		{"http://127.0.0.1:5678/workflow/aB3dE5fG7hI9jK1l/executions/231", "http://127.0.0.1:5678/workflow/aB3dE5fG7hI9jK1l/executions/231"},
		{"node 0a000000-0000-4000-8000-000000000004", "node 0a000000-0000-4000-8000-000000000004"},
		{"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		{"the basic plan; token expired", "the basic plan; token expired"},
		{"author: Jane, authentication: none", "author: Jane, authentication: none"},
	}
	for _, tc := range tests {
		if got := n8n.RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q)\n  = %q\n want %q", tc.in, got, tc.want)
		}
	}
}

func TestSensitiveName(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "pass": true, "passwd": true, "db_pass": true, "secret": true, "client_secret": true,
		"token": true, "access_token": true, "accessToken": true, "jwt": true, "auth": true, "Authorization": true,
		"api_key": true, "apiKey": true, "X-API-Key": true, "Ocp-Apim-Subscription-Key": true, "x-custom-key": true,
		"cookie": true, "Set-Cookie": true, "session": true, "sessionId": true, "X-Hub-Signature-256": true,
		"name": false, "author": false, "authentication": false, "event_id": false, "monkey": false,
		"passenger": false, "keyword": false, "url": false, "message": false,
	} {
		if got := n8n.SensitiveName(name); got != want {
			t.Errorf("SensitiveName(%q) = %v, want %v", name, got, want)
		}
	}
}

// payloadStrings returns every string of every captured payload, for seeds.
func payloadStrings(t testing.TB) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(payloadDir, "*.json"))
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, val := range t {
				out = append(out, k)
				walk(val)
			}
		case []any:
			for _, val := range t {
				walk(val)
			}
		case string:
			out = append(out, t)
		}
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		json.Unmarshal(raw, &v)
		walk(v)
	}
	return out
}

// smallSeeds are the strings of the captured payloads, cut to 128 bytes
// and once each: small seeds let the fuzzer explore instead of minimizing.
func smallSeeds(t testing.TB) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range payloadStrings(t) {
		s = s[:min(len(s), 128)]
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// smallDocs are the captured payloads' outlines and the shapes of issue 19,
// as small JSON documents, and documents at and past the nesting limit.
func smallDocs() []string {
	docs := []string{
		`{"execution":{"id":"7","mode":"webhook","error":{"message":"boom","node":{"name":"Fail"}},"lastNodeExecuted":"Fail"},"workflow":{"id":"w1","name":"Orders"}}`,
		`{"trigger":{"mode":"trigger","error":{"message":"poll failed"}},"workflow":{"id":"w2"},"message":"x"}`,
		`{"execution":{"id":"8","error":{"context":{"request":{"headers":"Accept: */*
X-Key: k1","qs":[["api_key","k2"]]}}}}}`,
		`{"response":{"rawHeaders":["X-Api-Key","k","Accept","*/*"]},"headers":["Cookie: a=b","Accept: x"]}`,
		`{"sk_live_4eC39HqLyjWDarjtT1zdp7dc":1,"description":"{"password":"p"}"}`,
		`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "}",
		strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70),
	}
	for _, sh := range shapes {
		if sh.text != nil {
			b, _ := json.Marshal(map[string]any{"message": sh.text(sh.secret)})
			docs = append(docs, string(b))
		}
	}
	return docs
}

// FuzzRedactText: no panic, idempotent, and never longer than its input
// plus the marks it wrote.
func FuzzRedactText(f *testing.F) {
	for _, s := range smallSeeds(f) {
		f.Add(s)
	}
	for _, sh := range shapes {
		if sh.text != nil {
			f.Add(sh.text(sh.secret))
		}
	}
	for _, sh := range n8ntest.CredentialShapes() {
		f.Add(sh.Text)
	}
	for _, s := range []string{"Authorization: Bearer abc", "https://u:p@h/", "a=1&password=x", `{\"token\": \"x\"}`,
		"Cookie: a=b", "Basic dXNlcjpwYXNz", "token ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "eyJa.eyJb.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := n8n.RedactText(in)
		if again := n8n.RedactText(out); again != out {
			t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q", in, out, again)
		}
		if limit := len(in) + strings.Count(out, n8n.Redacted)*len(n8n.Redacted) + len(n8n.CutUnchecked); len(out) > limit {
			t.Fatalf("output of %d bytes for %d of input and %d marks: %q → %q", len(out), len(in),
				strings.Count(out, n8n.Redacted), in, out)
		}
	})
}

// FuzzRedact: the structural redactor on any JSON object: no panic, and
// redacting again changes nothing.
func FuzzRedact(f *testing.F) {
	for _, doc := range smallDocs() {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		once := n8n.Redact(v)
		if twice := n8n.Redact(once); !reflect.DeepEqual(once, twice) {
			t.Fatalf("not idempotent:\n once  %v\n twice %v", once, twice)
		}
	})
}

// FuzzParseErrorTrigger: any JSON object n8n could send is parsed without
// panic into a report with clean text and a bounded, redacted payload.
func FuzzParseErrorTrigger(f *testing.F) {
	for _, doc := range smallDocs() {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v map[string]any
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if dec.Decode(&v) != nil || v == nil {
			return
		}
		r := n8n.ParseErrorTrigger(raw, v)
		if r.Kind == "" || r.DedupeKey == "" || len(r.Payload) > audit.MaxStoredPayload {
			t.Fatalf("report %+v", r)
		}
		for _, s := range []string{r.ExecutionID, r.RetryOf, r.WorkflowID, r.WorkflowName, r.Mode, r.Node, r.Message, r.URL, r.Payload} {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("unclean text %q", s)
			}
		}
		if again := n8n.ParseErrorTrigger(raw, v); again.DedupeKey != r.DedupeKey {
			t.Fatalf("the dedupe key changed on a second parse: %s, %s", r.DedupeKey, again.DedupeKey)
		}
	})
}
