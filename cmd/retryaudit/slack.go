package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/templates"
)

const slackTestUsage = `slack-test renders one test message with the Slack template and sends it with
the configured settings (RETRYAUDIT_SLACK_BOT_TOKEN and RETRYAUDIT_SLACK_CHANNEL,
or RETRYAUDIT_SLACK_WEBHOOK_URL; RETRYAUDIT_SLACK_API_URL to change the API's
address). With a bot token it first calls auth.test. It prints what Slack
answered and exits 1 if the message was not accepted.`

// newNotifier returns the configured Slack notifier, or nil.
func newNotifier(cfg config) notify.Notifier {
	switch {
	case cfg.SlackBotToken != "":
		return notify.NewBot(cfg.SlackBotToken, cfg.SlackChannel, cfg.SlackAPIURL)
	case cfg.SlackWebhookURL != "":
		return notify.NewWebhook(cfg.SlackWebhookURL)
	}
	return nil
}

func slackTest(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	n := newNotifier(cfg)
	if n == nil {
		return errors.New("Slack is not configured: set RETRYAUDIT_SLACK_BOT_TOKEN and RETRYAUDIT_SLACK_CHANNEL, " +
			"or RETRYAUDIT_SLACK_WEBHOOK_URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if bot, ok := n.(*notify.Bot); ok {
		who, err := bot.AuthTest(ctx)
		if err != nil {
			fmt.Fprintf(out, "auth.test: FAIL: %v\n", err)
			return err
		}
		fmt.Fprintf(out, "auth.test: ok, the token is %s\n", who)
	}
	base := cfg.BaseURL
	if base == "" {
		base = "http://" + cfg.Addr
	}
	r, err := notify.NewRenderer(templates.FS, audit.Links{BaseURL: base, N8NEditorURL: cfg.N8NEditorURL,
		CRM: cfg.CRMLinks}, nil)
	if err != nil {
		return err
	}
	m, err := r.Render(audit.Alert{Kind: "test", Source: "retryaudit-check", EventID: "slack-test",
		Message: "This is a test message from retryaudit slack-test. Alerts will look like this.", At: time.Now()})
	if err != nil {
		return err
	}
	posted, _, err := n.Notify(ctx, m)
	if err != nil {
		fmt.Fprintf(out, "%s: FAIL: %v\n", n.Name(), err)
		return err
	}
	fmt.Fprintf(out, "%s: ok", n.Name())
	if posted.TS != "" {
		fmt.Fprintf(out, ", message %s in %s", posted.TS, posted.Channel)
	}
	fmt.Fprintln(out)
	return nil
}
