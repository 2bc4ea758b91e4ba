package slackact

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/retryaudit/retryaudit/n8n"
)

// SocketConfig configures a Socket Mode connection.
type SocketConfig struct {
	AppToken string // xapp-…, with the connections:write scope
	APIURL   string // replaces https://slack.com/api/ (tests, proxies)
	Timeout  time.Duration
}

// RunSocket takes the presses Slack sends over a Socket Mode connection
// until ctx ends: no public URL is needed. Each interaction is
// acknowledged at once and acted on after; Slack sends each to one
// connection, so one instance acts on it. slack-go reconnects after a
// dropped connection; RunSocket returns when Slack refuses the token.
func (h *Handler) RunSocket(ctx context.Context, c SocketConfig) error {
	client := socketmode.New(client(c))
	done := make(chan error, 1)
	go func() { done <- client.RunContext(ctx) }()
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case evt := <-client.Events:
			switch evt.Type {
			case socketmode.EventTypeInteractive:
				cb, ok := evt.Data.(slack.InteractionCallback)
				if evt.Request != nil {
					if err := client.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil {
						h.log().Warn("slack: cannot acknowledge an interaction", "err", err)
					}
				}
				if ok {
					h.Dispatch(cb)
				}
			case socketmode.EventTypeConnected:
				h.log().Info("slack: Socket Mode connected")
			case socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth:
				h.log().Warn("slack: Socket Mode connection failed", "event", evt.Type)
			}
		}
	}
}

// CheckAppToken asks Slack for a Socket Mode connection's address
// (apps.connections.open) without connecting: it says whether the app
// token is accepted and Socket Mode is on in the app.
func CheckAppToken(ctx context.Context, c SocketConfig) error {
	_, _, err := client(c).StartSocketModeContext(ctx)
	if err != nil {
		return errors.New("slack: apps.connections.open refused the app token: " + err.Error() +
			" (check RETRYAUDIT_SLACK_APP_TOKEN, its connections:write scope, and that Socket Mode is on in the app)")
	}
	return nil
}

// client is the Web API client of an app token.
func client(c SocketConfig) *slack.Client {
	opts := []slack.Option{slack.OptionAppLevelToken(c.AppToken),
		slack.OptionHTTPClient(&http.Client{Timeout: max(c.Timeout, 15*time.Second), CheckRedirect: n8n.CheckRedirect})}
	if c.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimRight(c.APIURL, "/")+"/"))
	}
	return slack.New("", opts...)
}
