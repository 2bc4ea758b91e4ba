package audit_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
)

func TestRedact(t *testing.T) {
	in := map[string]any{
		"headers": map[string]any{"Authorization": "Bearer sk-live-1", "Cookie": "sid=secret-2", "X-API-Key": "k-3",
			"x-custom-key": "k-4", "accept": "application/json"},
		"parameters": map[string]any{"headerParameters": map[string]any{"parameters": []any{
			map[string]any{"name": "X-Shop-Token", "value": "k-5"}, map[string]any{"name": "X-Lab", "value": "plain"}}}},
		"body":                                 map[string]any{"password": "p-6", "client_secret": "s-7", "order": "order-1042", "access_token": ""},
		"uri":                                  "https://api.example.com/orders?api_key=k-8&id=order-1042",
		"jsonBody":                             `{"token": "t-9", "event_id": "evt-1"}`,
		"message":                              "request failed: Authorization: Basic dXNlcjpzZWNyZXQxMA==",
		"sendCredentialsOnCrossOriginRedirect": true,
	}
	raw, _ := json.Marshal(audit.Redact(in))
	out := string(raw)
	for _, secret := range []string{"sk-live-1", "secret-2", "k-3", "k-4", "k-5", "p-6", "s-7", "k-8", "t-9", "dXNlcjpzZWNyZXQxMA"} {
		if strings.Contains(out, secret) {
			t.Errorf("%s survived: %s", secret, out)
		}
	}
	for _, kept := range []string{"application/json", "plain", "order-1042", "evt-1", `"sendCredentialsOnCrossOriginRedirect":true`, `"access_token":""`} {
		if !strings.Contains(out, kept) {
			t.Errorf("%s was lost: %s", kept, out)
		}
	}
	if in["headers"].(map[string]any)["Authorization"] != "Bearer sk-live-1" {
		t.Error("Redact changed its input")
	}
}
