package n8n_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/config"

	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/n8n/rules"
	"github.com/retryaudit/retryaudit/n8n/rules/rulestest"
)

// TestRuleSetCorpusIsRedacted: every secret of gitleaks' test corpus, of
// every rule (the ones the redactor's structural pass stands in for too),
// is hidden by RedactText, and by Redact in a payload's message, headers
// and escaped JSON.
func TestRuleSetCorpusIsRedacted(t *testing.T) {
	all, err := rules.Load(config.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	corpus := rulestest.Corpus(t, all, 3)
	missed := map[string]int{}
	for _, c := range corpus {
		esc, _ := json.Marshal(map[string]any{"detail": c.Text})
		places := map[string]string{
			"text": n8n.RedactText(c.Text),
			"doc": docJSON(n8n.Redact(map[string]any{"message": c.Text, "description": string(esc),
				"rawHeaders": []any{"X-Note", c.Text}})),
		}
		for where, out := range places {
			for _, secret := range c.Secrets {
				if hidden(out, secret) {
					continue
				}
				missed[c.Rule]++
				t.Errorf("%s: %q survived in the %s: %q", c.Rule, secret, where, out)
			}
		}
	}
	t.Logf("%d samples of gitleaks' corpus; missed per rule: %v", len(corpus), missed)
}

// hidden reports that neither the secret nor its first half is left.
func hidden(out, secret string) bool {
	secret = strings.Trim(secret, "\"' ")
	return !strings.Contains(out, secret) && !strings.Contains(out, secret[:max(len(secret)/2, min(6, len(secret)))])
}

func docJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
