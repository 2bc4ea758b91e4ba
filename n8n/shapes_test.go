package n8n_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/n8n"
)

// shapes are the credential shapes that passed the pattern list before the
// structural pass and gitleaks' rules replaced it, each as n8n can send it:
// in free text (a message, a description) and in the payload's structure.
var shapes = []struct {
	name, secret string
	text         func(secret string) string
	doc          func(secret string) any
}{
	{"Authorization: ApiKey", "ak-0f9e8d7c6b5a", func(s string) string { return "401 - Authorization: ApiKey " + s + " was refused" }, nil},
	{"Authorization: GenieKey <uuid>", "5c1f0a9e-3b2d-4c7e-9f10-2a3b4c5d6e7f",
		func(s string) string { return `request headers {"Authorization": "GenieKey ` + s + `"}` }, nil},
	{"passphrase=", "correct-horse-battery", func(s string) string { return "ssh: passphrase=" + s + " rejected" }, nil},
	{"?appkey=", "app-key-value-77", func(s string) string { return "GET https://api.example/v2/items?id=4&appkey=" + s + "&page=2" }, nil},
	{"a double-escaped JSON password", "dbl-esc-pass-9",
		func(s string) string { return `500 - "{\\\"user\\\":\\\"crm\\\",\\\"password\\\":\\\"` + s + `\\\"}"` }, nil},
	{"//user:pw@proxy", "proxy-pw-31", func(s string) string { return "tunnel via //crm:" + s + "@proxy.internal:3128 failed" }, nil},
	{"a MySQL DSN", "mysql-pw-42", func(s string) string { return "dial app:" + s + "@tcp(db.internal:3306)/shop: refused" }, nil},
	{`Ruby's :password=>"…"`, "ruby-hash-pw", func(s string) string { return `{:user=>"crm", :password=>"` + s + `"}` }, nil},
	{"curl -u admin:pw", "curl-pw-55", func(s string) string { return "curl -s -u admin:" + s + " https://crm.example/api" }, nil},
	{"a string-valued headers", "str-hdr-secret-66", nil, func(s string) any {
		return map[string]any{"request": map[string]any{"headers": "Accept: */*\r\nX-Shop-Token: " + s + "\r\nUser-Agent: n8n"}}
	}},
	{"a secret inside a JSON key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", nil, func(s string) any {
		return map[string]any{"context": map[string]any{s: map[string]any{"status": 401}}}
	}},
	{`qs: [["api_key","…"]]`, "qs-pair-key-88", nil, func(s string) any {
		return map[string]any{"request": map[string]any{"qs": []any{[]any{"api_key", s}, []any{"page", "2"}}}}
	}},
	{"JSON escaped three times in a string", "triple-esc-pw-99", nil, func(s string) any {
		inner, _ := json.Marshal(map[string]any{"password": s})
		twice, _ := json.Marshal(string(inner))
		thrice, _ := json.Marshal(string(twice))
		return map[string]any{"description": string(thrice)}
	}},
}

// TestShapesThatPassedBefore: each shape is hidden in text and in a
// document, and what surrounds it stays.
func TestShapesThatPassedBefore(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			var out string
			if sh.text != nil {
				in := sh.text(sh.secret)
				out = n8n.RedactText(in)
				if again := n8n.RedactText(out); again != out {
					t.Errorf("not idempotent: %q → %q", out, again)
				}
				doc, _ := json.Marshal(n8n.Redact(map[string]any{"message": in}))
				out += "\n" + string(doc)
			}
			if sh.doc != nil {
				doc, _ := json.Marshal(n8n.Redact(sh.doc(sh.secret)))
				out = string(doc)
			}
			if strings.Contains(out, sh.secret) || strings.Contains(out, sh.secret[:len(sh.secret)/2+1]) {
				t.Fatalf("%s survived: %s", sh.secret, out)
			}
			if !strings.Contains(out, n8n.Redacted) {
				t.Errorf("nothing marked: %s", out)
			}
		})
	}
}

func TestStructuralKeepsWhatIsNoSecret(t *testing.T) {
	for in, want := range map[string]string{
		"Authorization: GenieKey 5c1f0a9e-3b2d-4c7e-9f10-2a3b4c5d6e7f": "Authorization: GenieKey [redacted]",
		"mailto support@example.com for help":                          "mailto support@example.com for help",
		"at 10:30 the job ran":                                         "at 10:30 the job ran",
		"GET https://api.example/v2/items?id=4&page=2":                 "GET https://api.example/v2/items?id=4&page=2",
		"password: null":                                               "password: null",
		"the key was rotated; token expired":                           "the key was rotated; token expired",
		"HttpRequestV3.node.ts:892:16":                                 "HttpRequestV3.node.ts:892:16",
		"primaryKey=id, monkey=george":                                 "primaryKey=[redacted], monkey=george",
		// An error class before a header line shields nothing and is kept.
		"NodeApiError: X-Auth-Token: Q9mZ+x2/abcdEF12":        "NodeApiError: X-Auth-Token: [redacted]",
		"NodeApiError: The service was not able to process":   "NodeApiError: The service was not able to process",
		"CredentialAccessError: Authorization: Token t0k3n55": "CredentialAccessError: Authorization: Token [redacted]",
		// Values on the next line; mappings and lists under a name stay.
		"password:\n  s3cr3t\nuser: crm":        "password:\n  [redacted]\nuser: crm",
		"auth:\n  user: crm\n  pass: pw1":       "auth:\n  user: crm\n  pass: [redacted]",
		"workflow:\n  name: Orders":             "workflow:\n  name: Orders",
		"token: |-\n  abc1\n  def2\nregion: eu": "token: |-\n  [redacted]\nregion: eu",
		"password:\nnext paragraph":             "password:\nnext paragraph",
		// URL-encoded text: what the decoded text hides, in its escapes.
		"p=%7B%22password%22%3A%22pw%2F1%22%7D": "p=%7B%22password%22%3A%22[redacted]%22%7D",
		"GET /search?q=hello%20world&page=2":    "GET /search?q=hello%20world&page=2",
		"DRIVER={ODBC Driver 18};PWD={p;w}1;":   "DRIVER={ODBC Driver 18};PWD={[redacted]}1;",
	} {
		if got := n8n.RedactText(in); got != want {
			t.Errorf("RedactText(%q)\n  = %q\n want %q", in, got, want)
		}
	}
}

func ExampleRedactText() {
	fmt.Println(n8n.RedactText(`dial app:mysql-pw@tcp(db:3306)/shop; {:password=>"x1"}; curl -u admin:pw https://h`))
	// Output: dial app:[redacted]@tcp(db:3306)/shop; {:password=>"[redacted]"}; curl -u [redacted] https://h
}
