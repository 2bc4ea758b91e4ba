package notify_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/notify"
)

// forged is a workflow name written to add lines that read like the
// message's own (issue 19: the Workflow field read orders / *Status* /
// :white_check_mark: resolved).
const forged = "orders\n*Status*\n:white_check_mark: resolved, nothing to do"

var fieldLabel = regexp.MustCompile(`^\*[A-Za-z ]+\*$`)

// checkFieldLines fails the test unless every field is label lines and
// value lines in turn, each value one line, and the Status label shows at
// most once.
func checkFieldLines(t *testing.T, fields []string) {
	t.Helper()
	status := 0
	for _, f := range fields {
		lines := strings.Split(f, "\n")
		if len(lines)%2 != 0 {
			t.Errorf("a field of %d lines: %q", len(lines), f)
			continue
		}
		for i := 0; i < len(lines); i += 2 {
			if !fieldLabel.MatchString(lines[i]) {
				t.Errorf("line %d of a field is no label: %q in %q", i, lines[i], f)
			}
			if lines[i] == "*Status*" {
				status++
			}
		}
	}
	if status > 1 {
		t.Errorf("%d Status fields: %q", status, fields)
	}
}

// TestNamesStayOnOneLine: workflow and node names from an error payload
// keep no control character (the intake writes them out as text), and a
// Slack field cannot be made to start a new line, whatever a value holds
// (a name stored before, an execution id).
func TestNamesStayOnOneLine(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		t.Run("through the intake", func(t *testing.T) {
			r := newRig(t, dialect, false)
			ctx := context.Background()
			if _, err := r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "o-1", ExecutionID: "4711",
				WorkflowID: "wf1"}); err != nil {
				t.Fatal(err)
			}
			for _, exec := range []string{"4711", "900"} { // linked to the event, and to nothing
				if _, err := r.store.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution,
					DedupeKey: "exec:" + exec, ExecutionID: exec, WorkflowID: "wf1", WorkflowName: forged,
					Node: "CRM\r\n*Kind*\nnothing", Message: "timeout\nsecond line", Mode: "webhook"}); err != nil {
					t.Fatal(err)
				}
			}
			var names []string
			r.store.DB().Select(&names, `SELECT workflow_name FROM n8n_errors`)
			for _, n := range names {
				if n != `orders\n*Status*\n:white_check_mark: resolved, nothing to do` {
					t.Errorf("stored workflow name %q", n)
				}
			}
			r.clock.Advance(time.Minute) // past the grace of an unlinked error
			r.drain(t)
			posts := r.slack.posts()
			if len(posts) != 2 {
				t.Fatalf("%d posts", len(posts))
			}
			for _, p := range posts {
				s := decode(t, p)
				checkFieldLines(t, s.Fields)
				for _, text := range append([]string{s.Text}, s.Mrkdwn...) {
					if strings.Contains(text, "\n*Status*") || strings.Contains(text, "\n*Kind*") {
						t.Errorf("a forged line: %q", text)
					}
				}
			}
		})
	})
	t.Run("whatever a stored value holds", func(t *testing.T) {
		r := notify.NewRenderer(links, nil)
		for _, a := range []audit.Alert{
			{Kind: audit.AlertExecutionError, Source: "shop", EventID: "o-1", Status: audit.StatusProcessing,
				WorkflowName: forged, Node: "CRM\u2028*Kind*", ExecutionID: "4711\n*Retry of*", RetryOf: "1\r2", Deliveries: 2},
			{Kind: audit.AlertUnlinkedError, ErrorID: 7, Group: "g", WorkflowName: forged, Node: "n\x85*Kind*", Count: 3,
				ExecutionID: "9\n9"},
		} {
			m := r.RenderRow(a, 1)
			s := decode(t, call{Text: m.Text, Blocks: blocksJSON(t, m)})
			checkFieldLines(t, s.Fields)
			for _, text := range append([]string{s.Text}, s.Mrkdwn...) {
				if strings.ContainsAny(text, "\r\u2028\u0085") || strings.Contains(text, "\n*") {
					t.Errorf("a value breaks a line: %q", text)
				}
			}
		}
	})
}

// blocksJSON is a message's blocks as Slack receives them.
func blocksJSON(t *testing.T, m notify.Message) string {
	t.Helper()
	raw, err := json.Marshal(m.Blocks)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
