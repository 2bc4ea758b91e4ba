package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

// TestRedactStored: what an earlier version stored unredacted is redacted
// once, and the alert rows stay valid.
func TestRedactStored(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{})
		db := s.DB()
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "old-1", ExecutionID: "1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:1",
			ExecutionID: "1", Message: "boom", Payload: `{"headers":{"x":"y"}}`}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorTrigger, DedupeKey: "sha256:1",
			WorkflowID: "poll", Node: "RSS", Message: "boom"}); err != nil {
			t.Fatal(err)
		}
		// As an earlier version left them:
		for _, q := range []string{
			`UPDATE n8n_errors SET message = 'Authorization: Bearer old-secret-01', payload = '{"headers": {"authorization": "old-secret-02"}}'`,
			`UPDATE event_history SET message = 'failed: password=old-secret-03' WHERE kind = 'error'`,
			`UPDATE outbox SET payload = replace(payload, '"boom"', '"token=old-secret-04"')`,
			`UPDATE n8n_errors SET workflow_name = 'sync api_key=old-secret-05', node = 'GET ?token=old-secret-06'`,
			`UPDATE event_history SET workflow_name = 'sync api_key=old-secret-07', node = 'Bearer old-secret-08'`,
			`UPDATE executions SET workflow_name = 'https://u:old-secret-09@crm.example/'`,
			`UPDATE alert_groups SET node = 'password=old-secret-10'`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		n, err := s.RedactStored(ctx)
		if err != nil || n < 10 {
			t.Fatalf("changed %d, %v", n, err)
		}
		var dump []string
		for _, q := range []string{`SELECT message || payload || workflow_name || node FROM n8n_errors`,
			`SELECT message || workflow_name || node FROM event_history`, `SELECT payload FROM outbox`,
			`SELECT workflow_name FROM executions`, `SELECT node FROM alert_groups`} {
			var vals []string
			if err := db.Select(&vals, q); err != nil {
				t.Fatal(err)
			}
			dump = append(dump, vals...)
		}
		all := strings.Join(dump, "\n")
		for i := 1; i <= 10; i++ {
			secret := fmt.Sprintf("old-secret-%02d", i)
			if strings.Contains(all, secret) {
				t.Errorf("%s stays:\n%s", secret, all)
			}
		}
		var payloads []string
		db.Select(&payloads, `SELECT payload FROM outbox`)
		for _, p := range payloads {
			if !json.Valid([]byte(p)) {
				t.Errorf("an alert row is no longer JSON: %s", p)
			}
		}
		if again, err := s.RedactStored(ctx); err != nil || again != 0 {
			t.Errorf("a second pass changed %d (%v): it runs once per version", again, err)
		}
	})
}

// TestNamesAreRedacted: a workflow's or a node's name that holds a
// credential is stored redacted, from a claim and from an error, in every
// table that keeps it.
func TestNamesAreRedacted(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{})
		name, node := "Sync api_key=name-secret-1", "GET https://u:node-secret-2@crm.example/"
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "n-1", ExecutionID: "1",
			WorkflowName: name, Node: node}); err != nil {
			t.Fatal(err)
		}
		if _, errs := s.ClaimTogether(ctx, []audit.ClaimRequest{{Source: "shop", EventID: "n-2", ExecutionID: "2",
			WorkflowName: name, Node: node}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		v := map[string]any{"execution": map[string]any{"id": "1", "mode": "webhook", "lastNodeExecuted": node,
			"error": map[string]any{"message": "boom", "node": map[string]any{"name": node}}},
			"workflow": map[string]any{"id": "w", "name": name}}
		for _, r := range []audit.N8NErrorReport{
			n8n.ParseErrorTrigger([]byte("an execution error"), v),
			// Built by hand, as reconciliation does: the store redacts too.
			{Kind: audit.N8NErrorTrigger, DedupeKey: "sha256:t", WorkflowID: "w", WorkflowName: name, Node: node, Message: "boom"},
		} {
			if _, err := s.RecordError(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		var dump []string
		for _, q := range []string{`SELECT workflow_name || ' ' || node FROM n8n_errors`,
			`SELECT workflow_name || ' ' || node FROM event_history`, `SELECT workflow_name FROM executions`,
			`SELECT node FROM alert_groups`, `SELECT payload FROM outbox`} {
			var vals []string
			if err := s.DB().Select(&vals, q); err != nil {
				t.Fatal(err)
			}
			dump = append(dump, vals...)
		}
		all := strings.Join(dump, "\n")
		for _, secret := range []string{"name-secret-1", "node-secret-2"} {
			if strings.Contains(all, secret) {
				t.Errorf("%s is stored:\n%s", secret, all)
			}
		}
		if !strings.Contains(all, "Sync api_key=[redacted]") || !strings.Contains(all, "GET https://u:[redacted]@crm.example/") {
			t.Errorf("the names are lost:\n%s", all)
		}
	})
}
