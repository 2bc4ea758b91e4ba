package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/n8n"
)

func TestInstancesConfig(t *testing.T) {
	t.Run("instances with their tokens, editors and APIs", func(t *testing.T) {
		c, err := loadConfig(env(map[string]string{
			"RETRYAUDIT_TOKEN":                  tok("prod-token"),
			"RETRYAUDIT_N8N_INSTANCES":          "staging, eu-2",
			"RETRYAUDIT_N8N_STAGING_TOKEN":      tok("staging-token"),
			"RETRYAUDIT_N8N_STAGING_EDITOR_URL": "https://n8n-staging.example/",
			"RETRYAUDIT_N8N_STAGING_API_URL":    "https://n8n-staging.example/api/v1",
			"RETRYAUDIT_N8N_STAGING_API_KEY":    "k",
			"RETRYAUDIT_N8N_EU_2_TOKEN":         tok("eu-token"),
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := []n8nInstance{
			{Name: "staging", Token: tok("staging-token"), EditorURL: "https://n8n-staging.example",
				APIURL: "https://n8n-staging.example/api/v1", APIKey: "k"},
			{Name: "eu-2", Token: tok("eu-token")},
		}
		if fmt.Sprint(c.Instances) != fmt.Sprint(want) {
			t.Errorf("instances = %+v", c.Instances)
		}
		if l := c.editorURLs(); l["staging"] != "https://n8n-staging.example" || len(l) != 2 {
			t.Errorf("editor URLs = %v", l)
		}
	})

	bad := []struct {
		vars map[string]string
		says string
	}{
		{map[string]string{"RETRYAUDIT_N8N_INSTANCES": "default"}, "RETRYAUDIT_N8N_INSTANCES: \"default\" is the instance"},
		{map[string]string{"RETRYAUDIT_N8N_INSTANCES": "Staging"}, "is not an instance name"},
		{map[string]string{"RETRYAUDIT_N8N_INSTANCES": "a,a", "RETRYAUDIT_N8N_A_TOKEN": "t"}, "named twice"},
		{map[string]string{"RETRYAUDIT_N8N_INSTANCES": "staging"}, "RETRYAUDIT_N8N_STAGING_TOKEN: required"},
		{map[string]string{"RETRYAUDIT_TOKEN": "same", "RETRYAUDIT_N8N_INSTANCES": "staging",
			"RETRYAUDIT_N8N_STAGING_TOKEN": "same"}, "is the same as RETRYAUDIT_TOKEN"},
		{map[string]string{"RETRYAUDIT_N8N_INSTANCES": "staging", "RETRYAUDIT_N8N_STAGING_TOKEN": "t",
			"RETRYAUDIT_N8N_STAGING_API_URL": "http://n8n:5678/api/v1"}, "RETRYAUDIT_N8N_STAGING_API_URL: set both"},
		{map[string]string{"RETRYAUDIT_N8N_INSTANCES": "staging", "RETRYAUDIT_N8N_STAGING_TOKEN": "t",
			"RETRYAUDIT_N8N_STAGING_EDITOR_URL": "n8n-staging"}, "RETRYAUDIT_N8N_STAGING_EDITOR_URL"},
	}
	for _, tc := range bad {
		t.Run("refuses "+strings.Join(keysOf(tc.vars), " "), func(t *testing.T) {
			_, err := loadConfig(env(tc.vars))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want it to say %q", err, tc.says)
			}
			if strings.Contains(fmtErr(err), "same\"") {
				t.Error("a token is in the error")
			}
		})
	}
}

// fakeAPI is one n8n instance's public API, knowing some executions.
func fakeAPI(t *testing.T, execs map[string]string) *n8n.Client {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/api/v1/executions/")
		body, ok := execs[id]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(ts.Close)
	return n8n.New(ts.URL+"/api/v1", "key", nil)
}

func TestLookupByInstance(t *testing.T) {
	prod := fakeAPI(t, map[string]string{
		"32": `{"id":"32","mode":"webhook","retryOf":null,"workflowId":"wfP","status":"success"}`})
	staging := fakeAPI(t, map[string]string{
		"32": `{"id":"32","mode":"retry","retryOf":"30","workflowId":"wfS","status":"success"}`})
	links := audit.Links{Instances: map[string]string{"staging": "", "eu": ""}}
	l := &lookupByInstance{links: links, clients: map[string]*n8n.Client{
		audit.DefaultInstance: prod, "staging": staging, "eu": nil}}
	ctx := context.Background()

	x, err := l.Execution(ctx, "32")
	if err != nil || x.ID != "32" || x.Mode != "webhook" || x.RetryOf != "" || x.WorkflowID != "wfP" {
		t.Errorf("the default instance's 32 = %+v, %v", x, err)
	}
	x, err = l.Execution(ctx, "32@staging")
	if err != nil || x.ID != "32@staging" || x.Mode != "retry" || x.RetryOf != "30@staging" || x.WorkflowID != "wfS@staging" {
		t.Errorf("staging's 32 = %+v, %v", x, err)
	}
	if _, err := l.Execution(ctx, "32@eu"); !errors.Is(err, audit.ErrNoAPI) {
		t.Errorf("an instance without an API: %v, want ErrNoAPI", err)
	}
	if _, err := l.Execution(ctx, "33@staging"); !errors.Is(err, audit.ErrExecutionNotFound) {
		t.Errorf("an execution staging does not know: %v", err)
	}
}
