package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		c, err := loadConfig(env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.Addr != "127.0.0.1:8080" || c.DataDir != "./data" || c.MaxBody != 1<<20 || c.ReviewAfter != 15*time.Minute ||
			c.Retention != 30*24*time.Hour || c.PayloadRetention != 14*24*time.Hour || c.N8NPoll != time.Minute ||
			c.AlertRepeat != time.Hour || c.N8NReconcileGrace != time.Minute || c.N8NReconcileLookback != 24*time.Hour {
			t.Errorf("defaults = %+v", c)
		}
	})

	t.Run("the trust header with the proxies it trusts", func(t *testing.T) {
		c, err := loadConfig(env(map[string]string{"RETRYAUDIT_UI_TRUST_HEADER": "X-Forwarded-User",
			"RETRYAUDIT_UI_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8, ::1"}))
		if err != nil || len(c.UITrustedProxies) != 3 || c.DBLockTimeout != 2*time.Second || c.DBMaxConns != 20 ||
			c.MaxErrorBody != 8<<20 || c.BodyBudget != 64<<20 || c.MetricsInterval != 15*time.Second {
			t.Errorf("%+v, %v", c, err)
		}
	})

	t.Run("secrets from files", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "token")
		os.WriteFile(path, []byte(tok("from-a-file")+"\n"), 0o600)
		c, err := loadConfig(env(map[string]string{"RETRYAUDIT_TOKEN_FILE": path}))
		if err != nil || c.Token != tok("from-a-file") {
			t.Errorf("token %q, %v", c.Token, err)
		}
	})

	t.Run("an empty secret file is refused, not read as unset", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "n8n_api_key")
		os.WriteFile(path, []byte("\n"), 0o600)
		_, err := loadConfig(env(map[string]string{"RETRYAUDIT_N8N_API_URL": "http://n8n:5678/api/v1",
			"RETRYAUDIT_N8N_API_KEY_FILE": path}))
		if err == nil || !strings.Contains(err.Error(), "RETRYAUDIT_N8N_API_KEY_FILE: "+path+" is empty") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("bcrypt hashes of htpasswd ($2y$) and Go ($2a$)", func(t *testing.T) {
		h, _ := bcrypt.GenerateFromPassword([]byte("pw"), minHashCost)
		y := strings.Replace(string(h), "$2a$", "$2y$", 1)
		c, err := loadConfig(env(map[string]string{"RETRYAUDIT_UI_USERS": "alice:" + string(h) + ",bob:" + y}))
		if err != nil || len(c.UIUsers) != 2 {
			t.Fatalf("users %v, %v", c.UIUsers, err)
		}
		if bcrypt.CompareHashAndPassword(c.UIUsers["bob"], []byte("pw")) != nil {
			t.Error("a $2y$ hash does not verify")
		}
	})

	bad := []struct {
		vars map[string]string
		says string
	}{
		{map[string]string{"RETRYAUDIT_RETENTION": "2d"}, "RETRYAUDIT_RETENTION: 48h0m0s is under 3 days: senders redeliver"},
		{map[string]string{"RETRYAUDIT_REVIEW_AFTER": "soon"}, "RETRYAUDIT_REVIEW_AFTER"},
		{map[string]string{"RETRYAUDIT_ALERT_REPEAT": "2d"}, "RETRYAUDIT_ALERT_REPEAT: 48h0m0s is over 24h"},
		{map[string]string{"RETRYAUDIT_ALERT_REPEAT": "often"}, "RETRYAUDIT_ALERT_REPEAT"},
		{map[string]string{"RETRYAUDIT_N8N_RECONCILE_GRACE": "-1m"}, "RETRYAUDIT_N8N_RECONCILE_GRACE"},
		{map[string]string{"RETRYAUDIT_N8N_RECONCILE_LOOKBACK": "a while"}, "RETRYAUDIT_N8N_RECONCILE_LOOKBACK"},
		{map[string]string{"RETRYAUDIT_ADDR": "8080"}, "RETRYAUDIT_ADDR"},
		{map[string]string{"RETRYAUDIT_MAX_BODY": "a lot"}, "RETRYAUDIT_MAX_BODY"},
		{map[string]string{"RETRYAUDIT_BASE_URL": "retryaudit.example"}, "RETRYAUDIT_BASE_URL"},
		{map[string]string{"RETRYAUDIT_N8N_API_URL": "http://n8n:5678/api/v1"}, "RETRYAUDIT_N8N_API_KEY"},
		{map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-1"}, "RETRYAUDIT_SLACK_CHANNEL"},
		{map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-1", "RETRYAUDIT_SLACK_CHANNEL": "C",
			"RETRYAUDIT_SLACK_WEBHOOK_URL": "https://hooks.slack.com/x"}, "not both"},
		{map[string]string{"RETRYAUDIT_CRM_LINKS": "shop=https://crm/{order}"}, "{order}"},
		{map[string]string{"RETRYAUDIT_UI_USERS": "alice:plaintext"}, "not a bcrypt hash"},
		// a hash of cost 5, as htpasswd -nbB makes by default
		{map[string]string{"RETRYAUDIT_UI_USERS": "alice:$2y$05$YyHhjY7e3SOVdE6fxAitA.zkSaRjpwOfX8YEz1I2XzZcy0GfgtRZ2"},
			`RETRYAUDIT_UI_USERS: the hash of "alice" has bcrypt cost 5, under 10 (htpasswd -B makes cost 5 unless told): make one with: htpasswd -nbBC 10 alice PASSWORD`},
		{map[string]string{"RETRYAUDIT_TOKEN": "a", "RETRYAUDIT_TOKEN_FILE": "/x"}, "not both"},
		{map[string]string{"RETRYAUDIT_LOG_LEVEL": "loud"}, "RETRYAUDIT_LOG_LEVEL"},
		{map[string]string{"RETRYAUDIT_UI_TRUST_HEADER": "X-Forwarded-User"}, "requires RETRYAUDIT_UI_TRUSTED_PROXIES"},
		{map[string]string{"RETRYAUDIT_UI_TRUSTED_PROXIES": "10.0.0.0/8, proxy.local"}, "proxy.local"},
		{map[string]string{"RETRYAUDIT_MAX_BODY": "4MiB", "RETRYAUDIT_MAX_ERROR_BODY": "2MiB"}, "RETRYAUDIT_MAX_ERROR_BODY"},
		{map[string]string{"RETRYAUDIT_BODY_BUDGET": "1MiB"}, "RETRYAUDIT_BODY_BUDGET"},
		{map[string]string{"RETRYAUDIT_DB_MAX_CONNS": "1"}, "RETRYAUDIT_DB_MAX_CONNS"},
		{map[string]string{"RETRYAUDIT_DB_LOCK_TIMEOUT": "never"}, "RETRYAUDIT_DB_LOCK_TIMEOUT"},
	}
	for _, tc := range bad {
		t.Run("refuses "+strings.Join(keysOf(tc.vars), " "), func(t *testing.T) {
			_, err := loadConfig(env(tc.vars))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want it to say %q", err, tc.says)
			}
			if strings.Contains(fmtErr(err), "xoxb-1") {
				t.Error("a secret is in the error")
			}
		})
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, env(nil), &out); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"serve", "migrate", "check", "connect", "slack-test", "healthcheck", "version"} {
			if !strings.Contains(out.String(), "  "+cmd) {
				t.Errorf("%v does not list %s:\n%s", args, cmd, out.String())
			}
		}
	}
	for _, cmd := range []string{"serve", "migrate", "check", "connect", "slack-test", "healthcheck", "version"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{cmd, "--help"}, env(nil), &out)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "usage: retryaudit "+cmd) {
			t.Errorf("%s --help: %v\n%s", cmd, err, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"check", "--help"}, env(nil), &out); !strings.Contains(out.String(), "-url") {
		t.Errorf("check --help does not explain --url: %v\n%s", err, out.String())
	}
	if err := run(context.Background(), []string{"frobnicate"}, env(nil), &out); err == nil {
		t.Error("an unknown command is accepted")
	}
}
