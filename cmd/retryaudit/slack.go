package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/slackact"
)

const slackTestUsage = `slack-test sends one test message with the configured settings
(RETRYAUDIT_SLACK_BOT_TOKEN and RETRYAUDIT_SLACK_CHANNEL, or
RETRYAUDIT_SLACK_WEBHOOK_URL; RETRYAUDIT_SLACK_API_URL to change the API's
address). With a bot token it first calls auth.test and says which of the
scopes retryaudit uses the token has (chat:write to post; channels:history
or groups:history to look for a message whose answer never came instead of
posting it twice). Then it says how many alerts wait to be sent, counting
those the next start of serve queues again because the configuration
changed. It prints what Slack answered and exits 1 if the message was not
accepted.`

// newNotifier returns the configured Slack notifier, or nil.
func newNotifier(cfg config) notify.Notifier {
	switch {
	case cfg.SlackBotToken != "":
		return notify.NewBot(notify.BotConfig{Token: cfg.SlackBotToken, Channel: cfg.SlackChannel, APIURL: cfg.SlackAPIURL})
	case cfg.SlackWebhookURL != "":
		return notify.NewWebhook(cfg.SlackWebhookURL, 0)
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
		info, err := bot.AuthTest(ctx)
		if err != nil {
			fmt.Fprintf(out, "auth.test: FAIL: %v\n", err)
			return err
		}
		fmt.Fprintf(out, "auth.test: ok, the token is %s\n", info.Who)
		fmt.Fprintln(out, scopesLine(info))
	}
	base := cfg.BaseURL
	if base == "" {
		base = "http://" + cfg.Addr
	}
	r := notify.NewRenderer(audit.Links{BaseURL: base, N8NEditorURL: cfg.N8NEditorURL, CRM: cfg.CRMLinks,
		Instances: cfg.editorURLs()}, nil)
	m := r.Render(audit.Alert{Kind: "test", Source: audit.ScratchSource, EventID: "slack-test",
		Message: "This is a test message from retryaudit slack-test. Alerts will look like this.", At: time.Now()})
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
	fmt.Fprintln(out, waitingLine(ctx, cfg, n))
	return nil
}

// scopesLine says which of the scopes retryaudit uses the token has.
func scopesLine(info notify.AuthInfo) string {
	has := map[string]bool{}
	for _, s := range info.Scopes {
		has[s] = true
	}
	var parts []string
	if has["chat:write"] {
		parts = append(parts, "chat:write (post)")
	} else {
		parts = append(parts, "chat:write MISSING (cannot post)")
	}
	if info.CanReadHistory() {
		parts = append(parts, "history (a message whose answer never came is looked for, not posted twice)")
	} else {
		parts = append(parts, "channels:history and groups:history missing (after a timeout a message may be posted twice)")
	}
	return "scopes: " + strings.Join(parts, "; ") + " [token has: " + strings.Join(info.Scopes, ",") + "]"
}

// waitingLine says how many alerts wait to be sent with this configuration.
func waitingLine(ctx context.Context, cfg config, n notify.Notifier) string {
	a, err := openApp(ctx, cfg, newLogger(io.Discard, cfg.LogLevel), nil, false)
	if err != nil {
		return "outbox: cannot count the alerts waiting: " + err.Error()
	}
	defer a.store.Close()
	if current, err := a.store.SchemaCurrent(ctx); err != nil || !current {
		return "outbox: the database is not migrated yet (serve and migrate do it): no alert waits"
	}
	fp, err := notify.ConfigFingerprint(ctx, a.store, n)
	if err != nil {
		return "outbox: cannot count the alerts waiting: " + err.Error()
	}
	w, err := a.store.WaitingAlerts(ctx, fp)
	if err != nil {
		return "outbox: cannot count the alerts waiting: " + err.Error()
	}
	s := fmt.Sprintf("outbox: %d alerts wait to be sent", w.Pending)
	if w.Resend > 0 {
		s += fmt.Sprintf("; %d more of the last 24 h, not sent for want of a working configuration, "+
			"are queued again at the next start of serve", w.Resend)
	}
	return s
}

// slackHandler is the handler of the alerts' button presses, made once:
// the signed requests and the Socket Mode connection share it.
func (a *app) slackHandler() *slackact.Handler {
	a.slackOnce.Do(func() {
		cfg := a.cfg
		bot := notify.NewBot(notify.BotConfig{Token: cfg.SlackBotToken, Channel: cfg.SlackChannel, APIURL: cfg.SlackAPIURL})
		acts := slackact.StoreActions{Store: a.store}
		if a.lookups != nil {
			acts.LookupFunc = slackact.PeopleLookup(a.lookups)
		}
		if a.retrier != nil {
			acts.RetryFunc = slackact.RetriesRetry(a.retrier)
		}
		a.slack = &slackact.Handler{Actions: acts, Users: cfg.SlackUsers, Reply: bot, Log: a.log}
	})
	return a.slack
}

// actionButtons says which buttons act on an entry from the bot's messages.
func (a *app) actionButtons() notify.ActionButtons {
	b := notify.ActionButtons{On: a.cfg.SlackActions() && a.cfg.SlackBotToken != ""}
	if a.lookups != nil {
		b.Lookup = a.lookups.Configured
	}
	b.Retry = a.retrier != nil && a.cfg.anyN8NAPI()
	return b
}

// interactions is POST /slack/interactions, or nil without a signing
// secret.
func (a *app) interactions() http.Handler {
	if a.cfg.SlackSigningSecret == "" || a.cfg.SlackBotToken == "" {
		return nil
	}
	return a.slackHandler().Interactions(a.cfg.SlackSigningSecret)
}

// startSlack opens the Socket Mode connection, when an app token is set,
// and waits for the presses in flight at the stop.
func (a *app) startSlack(ctx context.Context, j *jobs) {
	if !a.cfg.SlackActions() || a.cfg.SlackBotToken == "" {
		return
	}
	h := a.slackHandler()
	if a.cfg.SlackAppToken != "" {
		j.run(ctx, func(ctx context.Context) error {
			err := h.RunSocket(ctx, slackact.SocketConfig{AppToken: a.cfg.SlackAppToken, APIURL: a.cfg.SlackAPIURL})
			if err != nil {
				a.log.Error("slack: Socket Mode stopped: button presses are not taken over it "+
					"(check RETRYAUDIT_SLACK_APP_TOKEN)", "err", err)
			}
			return err
		})
	}
	j.run(ctx, func(ctx context.Context) error {
		<-ctx.Done()
		h.Wait()
		return nil
	})
}

// slackActions checks the ways button presses come in, and says when the
// digest goes out.
func (c *checker) slackActions(ctx context.Context, cfg config) {
	people := fmt.Sprintf("%d Slack users mapped to people", len(cfg.SlackUsers))
	switch {
	case !cfg.SlackActions():
		c.line("slack actions", "off: the alerts carry links only (RETRYAUDIT_SLACK_APP_TOKEN or "+
			"RETRYAUDIT_SLACK_SIGNING_SECRET turn the buttons on)", nil)
	default:
		if cfg.SlackAppToken != "" {
			err := slackact.CheckAppToken(ctx, slackact.SocketConfig{AppToken: cfg.SlackAppToken, APIURL: cfg.SlackAPIURL})
			c.line("slack actions", "Socket Mode: the app token is accepted; "+people, err)
		}
		if cfg.SlackSigningSecret != "" {
			c.line("slack actions", "signed presses at POST /slack/interactions (the app's Request URL: "+
				cmp.Or(cfg.BaseURL, "http://"+cfg.Addr)+"/slack/interactions); "+people, nil)
		}
	}
	if cfg.DigestOn {
		at := time.Time{}.Add(cfg.DigestAt).Format("15:04")
		c.line("digest", "daily at "+at+" "+cfg.DigestTZ.String()+", to the Slack channel", nil)
	}
}

// anyN8NAPI reports whether some n8n instance's API is configured: only
// then can a failed execution be retried.
func (c config) anyN8NAPI() bool {
	if c.N8NAPIURL != "" {
		return true
	}
	for _, in := range c.Instances {
		if in.APIURL != "" {
			return true
		}
	}
	return false
}
