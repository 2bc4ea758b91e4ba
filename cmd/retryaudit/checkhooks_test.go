package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestCheckHooks: check says whether hook calls arrive, and drills the
// hooks' endpoint of a running instance with the hook token.
func TestCheckHooks(t *testing.T) {
	dir := t.TempDir()
	svc := startService(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir})
	out, err := runCheck(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir}, "--url", svc.URL)
	if err != nil || !regexp.MustCompile(`(?m)^ok    drill: hooks\s+through `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^ok    hooks\s+no call yet`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^ok    hook token\s+generated, kept in `).MatchString(out) {
		t.Fatalf("err %v:\n%s", err, out)
	}

	req, _ := http.NewRequest("POST", svc.URL+"/v1/n8n/executions", strings.NewReader(`{"reports":[{"phase":"end",`+
		`"execution_id":"5","workflow_id":"w","mode":"webhook","started_at":"2026-01-02T03:04:05Z",`+
		`"stopped_at":"2026-01-02T03:04:06Z","status":"success"}]}`))
	req.Header.Set("Authorization", "Bearer "+svc.HookToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a hook call: %v %v", resp, err)
	}
	resp.Body.Close()
	out, err = runCheck(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir})
	if err != nil || !regexp.MustCompile(`(?m)^ok    hooks\s+last call \S+ ago: 1 report\(s\), the last the end of execution 5 \(success\)`).MatchString(out) {
		t.Errorf("after a hook call, err %v:\n%s", err, out)
	}
	if code, body := svc.api(t, "GET", "/v1/events", ""); code != 200 || strings.Contains(body, "retryaudit-check") {
		t.Errorf("the drill left something behind: %d %s", code, body)
	}

	out, err = runCheck(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir, "RETRYAUDIT_HOOK_TOKEN": tok("not-the-hook-token")}, "--url", svc.URL)
	if err == nil || !failLine(out, "drill: hooks") || !strings.Contains(out, "refused the hook token") {
		t.Errorf("a wrong hook token: err %v:\n%s", err, out)
	}
}
