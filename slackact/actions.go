// Package slackact takes the presses of the action buttons on retryaudit's
// Slack alerts — Mark done, Mark failed, Look up in CRM, Retry in n8n — from
// Slack's signed interactivity requests or a Socket Mode connection, and
// acts through the same fences as the pages: the person is a Slack user
// mapped to one of the pages' people, and the press carries the holder and
// the entry's version its message showed.
package slackact

import (
	"context"
	"errors"
	"strings"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/notify"
)

// Via is what a history line written from Slack says of where it came
// from: the note of a resolution made with a button.
const Via = "via Slack"

// Press is one press of an action button by a person the service knows.
type Press struct {
	Action    string // notify.ActionDone, ActionFailed, ActionLookup, ActionRetry
	Entry     notify.ActionValue
	Person    string // the pages' name of the Slack user
	SlackUser string // the Slack user's id
}

// Actions acts on an entry for a person. Each answers, in words for the
// person, what happened; an error's text says why nothing changed.
type Actions interface {
	Resolve(ctx context.Context, p Press, to audit.Status) (string, error)
	Lookup(ctx context.Context, p Press) (string, error)
	Retry(ctx context.Context, p Press) (string, error)
}

// Resolver is the store's person path.
type Resolver interface {
	Resolve(ctx context.Context, req audit.ResolveRequest) (audit.Status, error)
}

// StoreActions acts with the store's person path, and with the CRM lookup
// and the guarded retry when this instance has them.
type StoreActions struct {
	Store Resolver
	// LookupFunc runs the CRM lookup of the press's event and records it in
	// its history; nil when no lookup is configured.
	LookupFunc func(ctx context.Context, p Press) (string, error)
	// RetryFunc asks n8n to retry the entry's failed execution, fenced as
	// every retry is; nil when n8n's API is not configured.
	RetryFunc func(ctx context.Context, p Press) (string, error)
}

// ErrUnavailable says that this instance has no such action configured.
var ErrUnavailable = errors.New("not available on this instance")

// Resolve marks the entry done or failed as the page's form does, fenced
// by the version and holder the message showed, with the person as the
// actor and "via Slack" as the note.
func (a StoreActions) Resolve(ctx context.Context, p Press, to audit.Status) (string, error) {
	v := p.Entry
	_, err := a.Store.Resolve(ctx, audit.ResolveRequest{Source: v.Source, EventID: v.EventID, Item: v.Item, To: to,
		Actor: p.Person, Note: Via, Holder: v.Holder, Version: v.Version, Via: audit.ViaSlack})
	var ae *audit.Error
	switch {
	case errors.As(err, &ae) && ae.Fields["confirm"] != "":
		return "", errors.New("the entry does not wait for review and may still be running: " +
			"resolve it on its audit page, where you can confirm that no execution runs the action")
	case err != nil:
		// The fence's words are the page's: say them of the alert.
		msg := strings.TrimPrefix(err.Error(), "audit: ")
		msg = strings.Replace(msg, "since the page was loaded", "since this alert showed it", 1)
		return "", errors.New(strings.Replace(msg, "reload the page", "open its audit page", 1))
	}
	if to == audit.StatusDone {
		return "Marked done: " + name(v) + ".", nil
	}
	return "Marked failed: " + name(v) + ". The next delivery or a Retry in n8n will process it again.", nil
}

// Lookup runs the CRM lookup, when this instance has one.
func (a StoreActions) Lookup(ctx context.Context, p Press) (string, error) {
	if a.LookupFunc == nil {
		return "", errors.New("Look up in CRM is " + ErrUnavailable.Error() +
			" (no RETRYAUDIT_CRM_LOOKUP is configured for this source)")
	}
	return a.LookupFunc(ctx, p)
}

// Retry runs the guarded retry, when this instance has one.
func (a StoreActions) Retry(ctx context.Context, p Press) (string, error) {
	if a.RetryFunc == nil {
		return "", errors.New("Retry in n8n is " + ErrUnavailable.Error() + " (n8n's API is not configured)")
	}
	return a.RetryFunc(ctx, p)
}

// name names an entry for a person.
func name(v notify.ActionValue) string {
	s := v.Source + "/" + v.EventID
	if v.Item != "" {
		s += " item " + v.Item
	}
	return s
}
