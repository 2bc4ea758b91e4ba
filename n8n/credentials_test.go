package n8n_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

// TestCredentialCorpus: every shape of n8ntest's corpus (credential-shapes.json:
// cloud keys, JWTs, connection strings, service tokens, private keys,
// basic-auth URLs, cookies, form bodies, base64 user:pass, escaped JSON,
// split lines, and secrets after each of n8n's error classes) is hidden in
// free text and wherever a payload carries text (a message, escaped JSON in
// a description, a header list), what surrounds it stays, and a second pass
// changes nothing.
func TestCredentialCorpus(t *testing.T) {
	shapes := n8ntest.CredentialShapes()
	if len(shapes) < 60 {
		t.Fatalf("the corpus has %d shapes, want at least 60", len(shapes))
	}
	missed := 0
	for _, sh := range shapes {
		t.Run(sh.Group+"/"+sh.Name, func(t *testing.T) {
			text := n8n.RedactText(sh.Text)
			if again := n8n.RedactText(text); again != text {
				t.Errorf("not idempotent:\n once  %q\n twice %q", text, again)
			}
			esc, _ := json.Marshal(map[string]any{"detail": sh.Text})
			doc, _ := json.Marshal(n8n.Redact(map[string]any{"message": sh.Text, "description": string(esc),
				"rawHeaders": []any{"X-Note", sh.Text}}))
			for where, out := range map[string]string{"text": text, "payload": string(doc)} {
				if s := sh.Readable(out); s != "" {
					missed++
					t.Errorf("%q readable in the %s:\n in  %q\n out %q", s, where, sh.Text, out)
				}
			}
			for _, k := range sh.Keep {
				if !strings.Contains(text, k) {
					t.Errorf("%q was lost: %q", k, text)
				}
			}
		})
	}
	t.Logf("%d shapes, %d readable", len(shapes), missed)
}
