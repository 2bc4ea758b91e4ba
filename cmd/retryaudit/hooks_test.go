package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestHookToken: serve generates the hook token beside the API token; it
// opens the hooks' endpoint and nothing else, and the API token does not
// open that endpoint.
func TestHookToken(t *testing.T) {
	svc := startService(t, nil)
	report := `{"reports":[{"phase":"start","execution_id":"1","workflow_id":"w","mode":"webhook","started_at":"2026-01-02T03:04:05Z"}]}`
	call := func(token, path, body string) int {
		req, _ := http.NewRequest("POST", svc.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if svc.HookToken == "" || svc.HookToken == svc.Token {
		t.Fatalf("the generated hook token is %q, the API token %q", svc.HookToken, svc.Token)
	}
	if code := call(svc.HookToken, "/v1/n8n/executions", report); code != http.StatusAccepted {
		t.Errorf("the hook token on the hooks' endpoint: %d", code)
	}
	if code := call(svc.Token, "/v1/n8n/executions", report); code != http.StatusUnauthorized {
		t.Errorf("the API token on the hooks' endpoint: %d", code)
	}
	if code := call(svc.HookToken, "/v1/claims", `{"source":"shop","event_id":"1","execution_id":"1"}`); code != http.StatusUnauthorized {
		t.Errorf("the hook token on /v1/claims: %d", code)
	}
	svc.stop()
	if out := svc.Output.String(); strings.Contains(out, svc.HookToken) {
		t.Errorf("the hook token is in the output:\n%s", out)
	}
}

func TestHookTokenConfig(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		says string
	}{
		{map[string]string{"RETRYAUDIT_TOKEN": "same-1", "RETRYAUDIT_HOOK_TOKEN": "same-1"},
			"RETRYAUDIT_HOOK_TOKEN: is the same as RETRYAUDIT_TOKEN"},
		{map[string]string{"RETRYAUDIT_TOKEN": "api-1", "RETRYAUDIT_HOOK_TOKEN": "hook-1", "RETRYAUDIT_N8N_INSTANCES": "staging",
			"RETRYAUDIT_N8N_STAGING_TOKEN": "api-2", "RETRYAUDIT_N8N_STAGING_HOOK_TOKEN": "hook-1"},
			"RETRYAUDIT_N8N_STAGING_HOOK_TOKEN: is the same as RETRYAUDIT_HOOK_TOKEN"},
		{map[string]string{"RETRYAUDIT_TOKEN": "api-1", "RETRYAUDIT_N8N_INSTANCES": "staging",
			"RETRYAUDIT_N8N_STAGING_TOKEN": "api-2", "RETRYAUDIT_N8N_STAGING_HOOK_TOKEN": "api-2"},
			"RETRYAUDIT_N8N_STAGING_HOOK_TOKEN: is the same as RETRYAUDIT_N8N_STAGING_TOKEN"},
		{map[string]string{"RETRYAUDIT_HOOK_TOKEN": "a", "RETRYAUDIT_HOOK_TOKEN_FILE": "/x"}, "not both"},
	} {
		_, err := loadConfig(env(tc.vars))
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%v: err = %v, want it to say %q", tc.vars, err, tc.says)
		}
		for k, v := range tc.vars {
			if strings.HasSuffix(k, "TOKEN") && err != nil && strings.Contains(err.Error(), "="+v) {
				t.Errorf("a token is in the error: %v", err)
			}
		}
	}
	c, err := loadConfig(env(map[string]string{"RETRYAUDIT_HOOK_TOKEN": " " + tok("hook") + " ", "RETRYAUDIT_N8N_INSTANCES": "staging",
		"RETRYAUDIT_N8N_STAGING_TOKEN": tok("api-2"), "RETRYAUDIT_N8N_STAGING_HOOK_TOKEN": tok("hook-2")}))
	if err != nil || c.HookToken != tok("hook") || c.handlerInstances()[0].HookToken != tok("hook-2") {
		t.Errorf("%+v, %v", c, err)
	}
}
