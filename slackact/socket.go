package slackact

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
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
	opts := []slack.Option{slack.OptionAppLevelToken(c.AppToken),
		slack.OptionHTTPClient(&http.Client{Timeout: max(c.Timeout, 15*time.Second)})}
	if c.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimRight(c.APIURL, "/")+"/"))
	}
	client := socketmode.New(slack.New("", opts...))
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
