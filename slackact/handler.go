package slackact

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/notify"
)

// Replier shows an answer to the person who pressed a button, and to
// nobody else (the bot's chat.postEphemeral).
type Replier interface {
	Ephemeral(ctx context.Context, channel, user, text string) error
}

// Handler takes button presses and acts on them. A press is acted on after
// Slack has been answered (it waits three seconds at most), on a context
// of its own bounded by Timeout; Wait waits for the presses in flight.
type Handler struct {
	Actions Actions
	// Users maps a Slack user id to the pages' name of the person:
	// RETRYAUDIT_SLACK_USERS. Anyone else is told they cannot act.
	Users   map[string]string
	Reply   Replier
	Log     *slog.Logger
	Timeout time.Duration // one press, its answer included (default 1m)

	wg sync.WaitGroup
}

// Wait waits until every press taken so far is acted on and answered.
func (h *Handler) Wait() { h.wg.Wait() }

// Dispatch acts on the presses of an interaction in the background.
func (h *Handler) Dispatch(cb slack.InteractionCallback) {
	if cb.Type != slack.InteractionTypeBlockActions {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(h.Timeout, time.Minute))
		defer cancel()
		h.Handle(ctx, cb)
	}()
}

// Handle acts on the presses of an interaction and answers each. Presses
// of the link buttons (Audit row, n8n execution, CRM order) come too: they
// need nothing.
func (h *Handler) Handle(ctx context.Context, cb slack.InteractionCallback) {
	for _, a := range cb.ActionCallback.BlockActions {
		if a == nil {
			continue
		}
		switch a.ActionID {
		case notify.ActionDone, notify.ActionFailed, notify.ActionLookup, notify.ActionRetry:
		default:
			continue
		}
		text := h.press(ctx, cb.User.ID, a)
		channel := cmp.Or(cb.Channel.ID, cb.Container.ChannelID)
		if err := h.Reply.Ephemeral(ctx, channel, cb.User.ID, text); err != nil {
			h.log().Warn("slack: cannot answer a button press", "user", cb.User.ID, "action", a.ActionID, "err", err)
		}
	}
}

// press acts on one press and says what happened.
func (h *Handler) press(ctx context.Context, user string, a *slack.BlockAction) string {
	person, ok := h.Users[user]
	if !ok {
		h.log().Info("slack: a button press from a Slack user not in RETRYAUDIT_SLACK_USERS was refused",
			"user", user, "action", a.ActionID)
		return "You cannot act on retryaudit's entries from Slack: your Slack user (" + user +
			") is not mapped to a person in RETRYAUDIT_SLACK_USERS. Nothing was changed."
	}
	v, err := notify.ParseActionValue(a.Value)
	if err != nil {
		return "This button does not name an entry retryaudit knows. Nothing was changed."
	}
	p := Press{Action: a.ActionID, Entry: v, Person: person, SlackUser: user}
	var answer string
	switch a.ActionID {
	case notify.ActionDone:
		answer, err = h.Actions.Resolve(ctx, p, audit.StatusDone)
	case notify.ActionFailed:
		answer, err = h.Actions.Resolve(ctx, p, audit.StatusFailed)
	case notify.ActionLookup:
		answer, err = h.Actions.Lookup(ctx, p)
	case notify.ActionRetry:
		answer, err = h.Actions.Retry(ctx, p)
	}
	if err != nil {
		h.log().Info("slack: a button press was refused", "person", person, "action", a.ActionID,
			"source", v.Source, "event_id", v.EventID, "reason", err)
		return "Nothing was changed: " + err.Error()
	}
	h.log().Info("slack: a button press acted", "person", person, "action", a.ActionID,
		"source", v.Source, "event_id", v.EventID)
	return answer
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}
