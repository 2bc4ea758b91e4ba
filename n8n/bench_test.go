package n8n_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/n8n/rules"
)

// The redaction budget on this project's machine (2 slow cores, shared):
// a 16 KiB string, whatever it holds, and a 1 MiB error body from decoding
// to stored payload.
const (
	stringBudget = 5 * time.Millisecond
	bodyBudget   = 200 * time.Millisecond
)

// secretShaped are 16 KiB strings that cost redaction the most: credentials
// and credential-like names on every line, every keyword of gitleaks' rules,
// escaped JSON, and prose for comparison.
func secretShaped() map[string]string {
	fill := func(unit string) string {
		return strings.Repeat(unit, 16<<10/len(unit)+1)[:16<<10]
	}
	var kws []string
	for _, r := range rules.Default().Rules() {
		kws = append(kws, r.Config().Keywords...)
	}
	return map[string]string{
		"credentials on every line": fill(`{"headers":{"authorization":"Bearer abcdef","x-api-key":"zzz"},` +
			`"url":"https://u:pw@api.example.com/v1?id=42&api_key=k9","password":"hunter2hunter2",` +
			`"token":"ghp_0123456789abcdefABCDEF0123456789abcd","stripe":"sk_live_4eC39HqLyjWDarjtT1zdp7dc"}` + "\n"),
		"every keyword of the rules": fill(strings.Join(kws, " = a1b2c3d4e5f6g7h8i9j0 ") + "\n"),
		"escaped JSON":               fill(`{\"password\":\"p4ss\",\"token\":\"t0k3n-abcdef\",\"user\":\"crm\"} `),
		"key=value pairs":            fill("key=a1b2c3d4e5 secret=f6g7h8i9j0 token=k1l2m3n4o5 "),
		"prose":                      fill("The service was not able to process your request: the CRM timed out. "),
		"one long token":             fill("A"),
	}
}

// BenchmarkRedactText16KiB: RedactText on each 16 KiB string; the budget
// is 5 ms each. `go test -run '^$' -bench Redact ./n8n/` prints it.
func BenchmarkRedactText16KiB(b *testing.B) {
	for name, s := range secretShaped() {
		b.Run(name, func(b *testing.B) {
			var out string
			for b.Loop() {
				out = n8n.RedactText(s)
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds())/1000, "ms/16KiB")
			b.ReportMetric(float64(stringBudget.Milliseconds()), "budget-ms")
			if strings.HasSuffix(out, n8n.CutUnchecked) {
				b.ReportMetric(float64(strings.Index(out, n8n.CutUnchecked)), "bytes-kept-before-cut")
			}
		})
	}
}

// BenchmarkRedactBody1MiB: an Error Trigger body of 1 MiB whose strings are
// the secret-shaped ones above, from the decoded value to the stored,
// redacted payload; the budget is 200 ms.
func BenchmarkRedactBody1MiB(b *testing.B) {
	v := realPayload(b, "error-01-first-delivery.json")
	shaped := secretShaped()
	fields := map[string]any{}
	size := 0
	for i := 0; size < 1<<20; i++ {
		for name, s := range shaped {
			fields[fmt.Sprintf("%s %d", name, i)] = s
			size += len(s)
		}
	}
	v["execution"].(map[string]any)["error"].(map[string]any)["context"] = fields
	raw, _ := json.Marshal(v)
	var decoded map[string]any
	json.Unmarshal(raw, &decoded)
	sum := sha256.Sum256(raw)
	b.ResetTimer()
	for b.Loop() {
		r := n8n.ParseErrorTriggerBody(sum, decoded)
		if strings.Contains(r.Payload, "hunter2hunter2") {
			b.Fatal("a secret survived")
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/MiB")
	b.ReportMetric(float64(bodyBudget.Milliseconds()), "budget-ms")
	b.ReportMetric(float64(len(raw))/(1<<20), "MiB")
}

// BenchmarkRedactWholeDocument1MiB: Redact on the whole 1 MiB document,
// as RedactStored and the tests call it (the intake redacts only what it
// keeps).
func BenchmarkRedactWholeDocument1MiB(b *testing.B) {
	shaped := secretShaped()
	doc := map[string]any{}
	size := 0
	for i := 0; size < 1<<20; i++ {
		for name, s := range shaped {
			doc[fmt.Sprintf("%s %d", name, i)] = s
			size += len(s)
		}
	}
	for b.Loop() {
		n8n.Redact(doc)
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/MiB")
}
