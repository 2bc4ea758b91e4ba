package main

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestSlackActionsAndDigestConfig(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("pw"), minHashCost)
	users := "alice:" + string(h)
	bot := map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-1", "RETRYAUDIT_SLACK_CHANNEL": "C0ALERTS",
		"RETRYAUDIT_UI_USERS": users}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range bot {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	t.Run("both ways in, a mapped person and a digest in Berlin", func(t *testing.T) {
		c, err := loadConfig(env(with(map[string]string{"RETRYAUDIT_SLACK_SIGNING_SECRET": "s3cret",
			"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1-A-secret", "RETRYAUDIT_SLACK_USERS": "U0ALICE1=alice",
			"RETRYAUDIT_DIGEST_AT": "08:30", "RETRYAUDIT_DIGEST_TZ": "Europe/Berlin"})))
		if err != nil {
			t.Fatal(err)
		}
		if !c.SlackActions() || c.SlackUsers["U0ALICE1"] != "alice" || !c.DigestOn ||
			c.DigestAt != 8*time.Hour+30*time.Minute || c.DigestTZ.String() != "Europe/Berlin" {
			t.Errorf("%+v", c.slackSettings)
		}
	})

	t.Run("any name behind a proxy that signs people in", func(t *testing.T) {
		_, err := loadConfig(env(map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-1", "RETRYAUDIT_SLACK_CHANNEL": "C0ALERTS",
			"RETRYAUDIT_UI_TRUST_HEADER": "X-Forwarded-User", "RETRYAUDIT_UI_TRUSTED_PROXIES": "127.0.0.1",
			"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1", "RETRYAUDIT_SLACK_USERS": "U0BOB=bob"}))
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the pages' generated admin", func(t *testing.T) {
		_, err := loadConfig(env(map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-1", "RETRYAUDIT_SLACK_CHANNEL": "C0ALERTS",
			"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1", "RETRYAUDIT_SLACK_USERS": "U0ADMIN=admin"}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = loadConfig(env(map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-1", "RETRYAUDIT_SLACK_CHANNEL": "C0ALERTS",
			"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1", "RETRYAUDIT_SLACK_USERS": "U0ADMIN=alice"}))
		if err == nil || !strings.Contains(err.Error(), "the pages have one, admin") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("off by default", func(t *testing.T) {
		c, err := loadConfig(env(nil))
		if err != nil || c.SlackActions() || c.DigestOn || c.DigestTZ != time.UTC {
			t.Errorf("%+v, %v", c.slackSettings, err)
		}
	})

	for _, tc := range []struct {
		name string
		vars map[string]string
		says string
	}{
		{"a signing secret without a bot token", map[string]string{"RETRYAUDIT_SLACK_SIGNING_SECRET": "s3cret",
			"RETRYAUDIT_SLACK_WEBHOOK_URL": "https://hooks.slack.com/x", "RETRYAUDIT_UI_USERS": users,
			"RETRYAUDIT_SLACK_USERS": "U0ALICE1=alice"}, "RETRYAUDIT_SLACK_BOT_TOKEN: required with RETRYAUDIT_SLACK_SIGNING_SECRET"},
		{"an app token without a bot token", map[string]string{"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1",
			"RETRYAUDIT_UI_USERS": users, "RETRYAUDIT_SLACK_USERS": "U0ALICE1=alice"}, "an incoming webhook's cannot"},
		{"a bot token for an app token", with(map[string]string{"RETRYAUDIT_SLACK_APP_TOKEN": "xoxb-2",
			"RETRYAUDIT_SLACK_USERS": "U0ALICE1=alice"}), "RETRYAUDIT_SLACK_APP_TOKEN: is not an app-level token"},
		{"actions without people", with(map[string]string{"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1"}),
			"RETRYAUDIT_SLACK_USERS: required"},
		{"people without actions", with(map[string]string{"RETRYAUDIT_SLACK_USERS": "U0ALICE1=alice"}), "has no use"},
		{"a name none of the pages' people", with(map[string]string{"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1",
			"RETRYAUDIT_SLACK_USERS": "U0ALICE1=mallory"}), `"mallory" is none of the pages' people`},
		{"a user name for a user id", with(map[string]string{"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1",
			"RETRYAUDIT_SLACK_USERS": "@alice=alice"}), `"@alice" is not a Slack user id`},
		{"a pair without a name", with(map[string]string{"RETRYAUDIT_SLACK_APP_TOKEN": "xapp-1",
			"RETRYAUDIT_SLACK_USERS": "U0ALICE1"}), "SlackUserID=name"},
		{"a digest at no time", with(map[string]string{"RETRYAUDIT_DIGEST_AT": "8am"}), "RETRYAUDIT_DIGEST_AT"},
		{"a digest without Slack", map[string]string{"RETRYAUDIT_DIGEST_AT": "08:00"}, "the digest goes to Slack"},
		{"a zone that is none", with(map[string]string{"RETRYAUDIT_DIGEST_AT": "08:00", "RETRYAUDIT_DIGEST_TZ": "Mars/Olympus"}),
			"RETRYAUDIT_DIGEST_TZ"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			_, err := loadConfig(env(tc.vars))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want it to say %q", err, tc.says)
			}
			for _, secret := range []string{"s3cret", "xapp-1", "xoxb-2"} {
				if strings.Contains(fmtErr(err), secret) {
					t.Errorf("a secret is in the error: %v", err)
				}
			}
		})
	}
}
