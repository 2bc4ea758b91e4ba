package notify

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Posted says where a message went.
type Posted struct{ Channel, TS string }

// Notifier sends one message. On failure, retry says whether another
// attempt may succeed (transport errors, 5xx, rate limits) or not (a bad
// token, an unknown channel); RetryAfter(err) says how long Slack asked to
// wait. Errors never hold a token or a webhook URL.
type Notifier interface {
	Notify(ctx context.Context, m Message) (p Posted, retry bool, err error)
	// Threads reports whether the notifier can reply in threads and update
	// messages (the Web API can, an incoming webhook cannot).
	Threads() bool
	// Name names the destination for rate limits and logs, without secrets.
	Name() string
}

// Bot sends with the Web API: chat.postMessage and chat.update.
type Bot struct {
	client  *slack.Client
	channel string
	token   string
}

// NewBot returns a notifier posting to channel with a bot token. apiURL,
// when set, replaces https://slack.com/api/ (tests, proxies).
func NewBot(token, channel, apiURL string) *Bot {
	opts := []slack.Option{slack.OptionHTTPClient(&http.Client{Timeout: 15 * time.Second})}
	if apiURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimRight(apiURL, "/")+"/"))
	}
	return &Bot{client: slack.New(token, opts...), channel: channel, token: token}
}

// Threads reports true: the Web API replies in threads and updates messages.
func (b *Bot) Threads() bool { return true }

// Name names the channel.
func (b *Bot) Name() string { return "channel " + b.channel }

// Notify posts m, replies in its thread, or updates the message it names.
func (b *Bot) Notify(ctx context.Context, m Message) (Posted, bool, error) {
	channel := m.Channel
	if channel == "" {
		channel = b.channel
	}
	opts := []slack.MsgOption{slack.MsgOptionText(m.Text, false), slack.MsgOptionBlocks(m.Blocks.BlockSet...),
		slack.MsgOptionDisableLinkUnfurl()}
	var ch, ts string
	var err error
	if m.UpdateTS != "" {
		ch, ts, _, err = b.client.UpdateMessageContext(ctx, channel, m.UpdateTS, opts...)
	} else {
		if m.ThreadTS != "" {
			opts = append(opts, slack.MsgOptionTS(m.ThreadTS))
		}
		ch, ts, err = b.client.PostMessageContext(ctx, channel, opts...)
	}
	if err != nil {
		retry, clean := classify(err, b.token)
		return Posted{}, retry, clean
	}
	return Posted{Channel: ch, TS: ts}, false, nil
}

// AuthTest asks Slack who the token belongs to (auth.test).
func (b *Bot) AuthTest(ctx context.Context) (string, error) {
	r, err := b.client.AuthTestContext(ctx)
	if err != nil {
		_, clean := classify(err, b.token)
		return "", clean
	}
	return r.User + " in " + r.Team, nil
}

// Webhook sends with an incoming webhook: plain messages, no threads.
type Webhook struct {
	url  string
	http *http.Client
}

// NewWebhook returns a notifier posting to an incoming webhook URL.
func NewWebhook(webhookURL string) *Webhook {
	return &Webhook{url: webhookURL, http: &http.Client{Timeout: 15 * time.Second}}
}

// Threads reports false: a webhook can neither reply nor update.
func (w *Webhook) Threads() bool { return false }

// Name names the webhook without its secret path.
func (w *Webhook) Name() string {
	if u, err := url.Parse(w.url); err == nil {
		return "webhook at " + u.Host
	}
	return "webhook"
}

// Notify posts m as a new message.
func (w *Webhook) Notify(ctx context.Context, m Message) (Posted, bool, error) {
	blocks := m.Blocks
	err := slack.PostWebhookCustomHTTPContext(ctx, w.url, w.http, &slack.WebhookMessage{Text: m.Text, Blocks: &blocks})
	if err != nil {
		retry, clean := classify(err, w.url)
		return Posted{}, retry, clean
	}
	return Posted{}, false, nil
}

// sendError is a Slack failure with the secrets taken out.
type sendError struct {
	msg   string
	after time.Duration
}

// Error returns the message without secrets.
func (e *sendError) Error() string { return e.msg }

// RetryAfter returns how long Slack asked to wait before the next attempt,
// or 0.
func RetryAfter(err error) time.Duration {
	var e *sendError
	if errors.As(err, &e) {
		return e.after
	}
	return 0
}

// Slack's API errors that a later attempt may not see.
var transientAPIErrors = map[string]bool{
	"ratelimited": true, "internal_error": true, "fatal_error": true, "service_unavailable": true,
	"request_timeout": true, "team_added_to_org": true,
}

// classify decides whether err is worth another attempt, and returns it
// without the secrets: slack-go and net/http put URLs (a webhook's is its
// secret) into their errors.
func classify(err error, secrets ...string) (bool, error) {
	clean := func(msg string, after time.Duration) error {
		for _, s := range secrets {
			if s != "" {
				msg = strings.ReplaceAll(msg, s, "[redacted]")
			}
		}
		return &sendError{msg: "slack: " + msg, after: after}
	}
	var limited *slack.RateLimitedError
	var status slack.StatusCodeError
	var api slack.SlackErrorResponse
	var uerr *url.Error
	switch {
	case errors.As(err, &limited):
		return true, clean("rate limited", limited.RetryAfter)
	case errors.As(err, &status):
		return status.Code >= 500 || status.Code == http.StatusTooManyRequests, clean(status.Status, 0)
	case errors.As(err, &api):
		return transientAPIErrors[api.Err], clean(api.Err, 0)
	case errors.As(err, &uerr):
		return true, clean(uerr.Op+": "+uerr.Err.Error(), 0) // without the URL
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true, clean("no answer in time", 0)
	}
	return true, clean(err.Error(), 0)
}
