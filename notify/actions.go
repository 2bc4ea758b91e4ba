package notify

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/slack-go/slack"

	"github.com/retryaudit/retryaudit/audit"
)

// The action ids of the buttons that act on an entry from Slack. Slack
// sends them back in an interaction, with the button's value.
const (
	ActionDone   = "retryaudit_done"
	ActionFailed = "retryaudit_failed"
	ActionLookup = "retryaudit_lookup"
	ActionRetry  = "retryaudit_retry"
)

// maxValue is the length Slack allows a button's value.
const maxValue = 2000

// ActionValue is what an action button carries: the entry and what the
// message showed of it. A press is fenced by Holder and Version as the
// page's form is, so that a button older than the entry's last change is
// refused.
type ActionValue struct {
	Source  string `json:"s"`
	EventID string `json:"e"`
	Item    string `json:"i,omitempty"`
	Holder  string `json:"h,omitempty"`
	Version int64  `json:"v"`
}

// ParseActionValue reads a button's value.
func ParseActionValue(s string) (ActionValue, error) {
	var v ActionValue
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return v, errors.New("notify: the button's value is not retryaudit's")
	}
	if err := audit.ValidateKey(v.Source, v.EventID); err != nil || v.Version <= 0 {
		return v, errors.New("notify: the button's value names no entry")
	}
	return v, nil
}

// ActionButtons says which action buttons a bot's messages carry. The zero
// value carries none (an incoming webhook cannot: Slack sends the presses
// of a message only to the app that posted it).
type ActionButtons struct {
	// On adds Mark done and Mark failed to a processing entry's message.
	On bool
	// Lookup reports whether a CRM lookup is configured for a source; nil,
	// there is no Look up in CRM button.
	Lookup func(source string) bool
	// Retry adds Retry in n8n to a failed entry's message.
	Retry bool
}

// EntryReader reads the entry an alert is about, for its action buttons.
type EntryReader interface {
	Event(ctx context.Context, source, eventID string) (audit.EventDetail, error)
}

// actionState is the entry as the message shows it.
type actionState struct {
	status  audit.Status
	holder  string
	version int64
}

// readState reads the entry of an event's alert; ok is false when it has
// none (an item left, the event pruned).
func readState(ctx context.Context, r EntryReader, a audit.Alert) (actionState, bool, error) {
	d, err := r.Event(ctx, a.Source, a.EventID)
	if audit.ErrorCode(err) == audit.CodeNotFound {
		return actionState{}, false, nil
	}
	if err != nil {
		return actionState{}, false, err
	}
	if a.Item == "" {
		if d.ItemCount > 0 {
			return actionState{}, false, nil // resolved item by item, on the page
		}
		return actionState{d.Status, d.Holder, d.Version}, true, nil
	}
	for _, it := range d.Items {
		if it.Item == a.Item {
			return actionState{it.Status, it.Holder, it.Version}, true, nil
		}
	}
	return actionState{}, false, nil
}

// withActions adds the action buttons that fit the entry's state to a
// message: none for a settled entry, so that its message, updated in
// place, shows no button that would be refused.
func (b ActionButtons) withActions(m Message, a audit.Alert, s actionState) Message {
	raw, _ := json.Marshal(ActionValue{Source: a.Source, EventID: a.EventID, Item: a.Item, Holder: s.holder,
		Version: s.version})
	value := string(raw)
	if len(value) > maxValue {
		return m // the page still has the form; the Audit row button links it
	}
	var els []slack.BlockElement
	add := func(id, text string, style slack.Style) {
		btn := slack.NewButtonBlockElement(id, value, slack.NewTextBlockObject(slack.PlainTextType, text, false, false))
		btn.Style = style
		els = append(els, btn)
	}
	lookup := b.Lookup != nil && b.Lookup(a.Source)
	switch s.status {
	case audit.StatusProcessing:
		if lookup {
			add(ActionLookup, buttonLookup, "")
		}
		add(ActionDone, buttonDone, slack.StylePrimary)
		add(ActionFailed, buttonFailed, slack.StyleDanger)
	case audit.StatusFailed:
		if lookup {
			add(ActionLookup, buttonLookup, "")
		}
		if b.Retry {
			add(ActionRetry, buttonRetry, slack.StylePrimary)
		}
	}
	if len(els) == 0 || len(m.Blocks.BlockSet) >= maxBlocks {
		return m
	}
	blocks := append([]slack.Block(nil), m.Blocks.BlockSet...)
	m.Blocks = slack.Blocks{BlockSet: append(blocks, slack.NewActionBlock("retryaudit_actions", els...))}
	return m
}

// actions adds the action buttons to an event's message, reading the entry
// as it is now: the buttons carry the version the message shows.
func (w *Worker) actions(ctx context.Context, m Message, a audit.Alert) (Message, error) {
	b := w.Renderer.Actions
	if !b.On || !w.Notifier.Threads() || !a.HasEvent() || a.Group != "" || a.Kind == kindTest {
		return m, nil
	}
	s, ok, err := readState(ctx, w.Store, a)
	if err != nil || !ok {
		return m, err
	}
	return b.withActions(m, a, s), nil
}
