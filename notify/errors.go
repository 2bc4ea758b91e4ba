package notify

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// sendError is a Slack failure with the secrets taken out, and what the
// worker needs to know about it.
type sendError struct {
	msg   string
	after time.Duration // Retry-After
	// maybe: Slack may have posted the message (no answer came, or a 5xx).
	maybe bool
	// config: a change of token, webhook or channel can cure it.
	config bool
	// oversized: Slack refused the message itself (invalid_blocks,
	// msg_too_long): a defect of ours.
	oversized bool
}

// Error returns the message without secrets.
func (e *sendError) Error() string { return e.msg }

func asSendError(err error) *sendError {
	var e *sendError
	if errors.As(err, &e) {
		return e
	}
	return &sendError{}
}

// RetryAfter returns how long Slack asked to wait before the next attempt,
// or 0.
func RetryAfter(err error) time.Duration { return asSendError(err).after }

// MaybeSent reports whether Slack may have posted the message although the
// attempt failed: it timed out, the connection broke after the request went
// out, or Slack answered 5xx.
func MaybeSent(err error) bool { return asSendError(err).maybe }

// ConfigError reports whether a change of the Slack configuration can cure
// err (a revoked token, an unknown channel, a deleted webhook).
func ConfigError(err error) bool { return asSendError(err).config }

// Oversized reports whether Slack refused the message itself.
func Oversized(err error) bool { return asSendError(err).oversized }

// Slack's API errors that a later attempt may not see; true when Slack may
// have posted the message before failing.
var transientAPIErrors = map[string]bool{
	"ratelimited": false, "rate_limited": false, "internal_error": true, "fatal_error": true,
	"service_unavailable": false, "request_timeout": true, "team_added_to_org": false,
}

// Slack's API errors (and webhook answers) that a new token, webhook or
// channel can cure.
var configErrors = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true,
	"token_expired": true, "invalid_token": true, "channel_not_found": true, "not_in_channel": true,
	"is_archived": true, "channel_is_archived": true, "missing_scope": true, "no_permission": true,
	"no_service": true, "no_service_id": true, "no_team": true, "team_disabled": true,
	"action_prohibited": true, "restricted_action": true, "ekm_access_denied": true,
	"access_denied": true, "org_login_required": true, "team_access_not_granted": true,
	"posting_to_general_channel_denied": true, "invalid_team": true,
}

// Slack's answers to a message it cannot take as built.
var oversizedErrors = map[string]bool{
	"invalid_blocks": true, "invalid_blocks_format": true, "msg_too_long": true, "msg_blocks_too_long": true,
	"too_many_attachments": true, "invalid_attachments": true, "invalid_metadata_format": true,
	"invalid_metadata_schema": true, "metadata_too_large": true, "invalid_payload": true,
}

// classify decides whether err is worth another attempt, and returns it
// without the secrets: slack-go and net/http put URLs (a webhook's is its
// secret) into their errors.
func classify(err error, secrets ...string) (bool, error) {
	e := &sendError{}
	clean := func(msg string) error {
		for _, s := range secrets {
			if s != "" {
				msg = strings.ReplaceAll(msg, s, "[redacted]")
			}
		}
		e.msg = "slack: " + msg
		return e
	}
	var limited *slack.RateLimitedError
	var status slack.StatusCodeError
	var api slack.SlackErrorResponse
	var uerr *url.Error
	switch {
	case errors.As(err, &limited):
		e.after = limited.RetryAfter
		return true, clean("rate limited")
	case errors.As(err, &status):
		e.maybe = status.Code >= 500
		return status.Code >= 500 || status.Code == http.StatusTooManyRequests, clean(status.Status)
	case errors.As(err, &api):
		return apiError(e, api.Err), clean(api.Err)
	case errors.As(err, &uerr):
		e.maybe = !neverSent(uerr.Err)
		return true, clean(uerr.Op + ": " + uerr.Err.Error()) // without the URL
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e.maybe = true
		return true, clean("no answer in time")
	}
	e.maybe = true
	return true, clean(err.Error())
}

// apiError classifies one of Slack's error codes and says whether to retry.
func apiError(e *sendError, code string) bool {
	maybe, transient := transientAPIErrors[code]
	e.maybe = maybe
	e.config = configErrors[code]
	e.oversized = oversizedErrors[code]
	return transient
}

// neverSent reports whether a transport error happened before the request
// could reach Slack: a failed dial or name lookup.
func neverSent(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &dns) || (errors.As(err, &op) && op.Op == "dial")
}
