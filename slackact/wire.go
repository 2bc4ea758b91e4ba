package slackact

import (
	"context"
	"errors"
	"strings"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/people"
	"github.com/retryaudit/retryaudit/retries"
)

// PeopleLookup runs the CRM lookup of a press's entry with the service's
// lookups, recorded in the event's history with the person and "slack".
func PeopleLookup(l *people.Lookups) func(ctx context.Context, p Press) (string, error) {
	return func(ctx context.Context, p Press) (string, error) {
		v := p.Entry
		r, err := l.RunItem(ctx, audit.EventKey{Source: v.Source, EventID: v.EventID}, v.Item,
			people.Who{Name: p.Person, Via: audit.ViaSlack})
		if err != nil {
			return "", err
		}
		return lookupAnswer(v, r), nil
	}
}

// lookupAnswer says what the CRM answered, and the one press that follows
// from it.
func lookupAnswer(v notify.ActionValue, r people.Result) string {
	switch r.Outcome {
	case audit.LookupFound:
		s := "Found in the CRM: " + name(v) + " is order " + r.CRMRef
		if r.Link != "" {
			s += " (" + r.Link + ")"
		}
		return s + ". If that is this event's order, press Mark done."
	case audit.LookupNotFound:
		return "Not found in the CRM: " + name(v) + ". If it should be there, press Mark failed: " +
			"the next delivery or a Retry in n8n processes it again."
	}
	return "The CRM lookup failed for " + name(v) + ": " + r.Message + ". Nothing was changed; try again, " +
		"or look it up in the CRM yourself."
}

// RetriesRetry asks n8n to retry a press's failed entry with the service's
// guarded retry, fenced by the version the message showed, recorded with
// the person and "slack".
func RetriesRetry(r *retries.Retrier) func(ctx context.Context, p Press) (string, error) {
	return func(ctx context.Context, p Press) (string, error) {
		v := p.Entry
		res, err := r.One(ctx, audit.EntryKey{Source: v.Source, EventID: v.EventID, Item: v.Item}, v.Version,
			retries.Who{Name: p.Person, Via: audit.ViaSlack})
		if err != nil {
			return "", errors.New(strings.TrimPrefix(strings.TrimPrefix(err.Error(), "retries: "), "audit: "))
		}
		return retryAnswer(v, res), nil
	}
}

// retryAnswer says how n8n's Retry went.
func retryAnswer(v notify.ActionValue, r retries.Result) string {
	s := "Retried " + name(v) + " in n8n: execution " + r.ExecutionID
	if r.NewExecutionID != "" {
		s += " → " + r.NewExecutionID
	}
	switch r.State {
	case "succeeded":
		return s + " succeeded: the entry is settled by its report."
	case "failed":
		return s + " failed again: " + r.Message + "."
	case "refused":
		return "n8n refused to retry " + name(v) + ": " + r.Message + "."
	}
	return s + ": " + r.Message + "."
}
