package slackact

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/slack-go/slack"
)

// MaxBody bounds an interactivity request: Slack sends the message the
// button is on with the press, and retryaudit's messages are far smaller.
const MaxBody = 1 << 20

// Interactions answers POST /slack/interactions: Slack's interactivity
// requests, signed with the app's signing secret. A request whose v0
// signature (HMAC-SHA256 of "v0:{timestamp}:{body}") does not match, or
// whose timestamp is more than five minutes away, is answered 401 and
// nothing changes; a signed one is answered at once and acted on after.
func (h *Handler) Interactions(secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			fail(w, http.StatusRequestEntityTooLarge, "body_too_large", "the request is larger than 1 MiB")
			return
		case err != nil:
			fail(w, http.StatusBadRequest, "bad_body", "the request's body could not be read")
			return
		}
		if code, msg := verify(r.Header, body, secret); code != "" {
			h.log().Warn("slack: an interactivity request was refused", "reason", code, "peer", r.RemoteAddr)
			fail(w, http.StatusUnauthorized, code, msg)
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("payload") == "" {
			fail(w, http.StatusBadRequest, "bad_payload", "the body is not a form with a payload field")
			return
		}
		var cb slack.InteractionCallback
		if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
			fail(w, http.StatusBadRequest, "bad_payload", "the payload field is not an interaction's JSON")
			return
		}
		h.Dispatch(cb)
		w.WriteHeader(http.StatusOK)
	})
}

// verify checks a request's signature in constant time (slack-go's
// SecretsVerifier), and names what is wrong.
func verify(header http.Header, body []byte, secret string) (code, message string) {
	if header.Get("X-Slack-Signature") == "" || header.Get("X-Slack-Request-Timestamp") == "" {
		return "unsigned", "X-Slack-Signature and X-Slack-Request-Timestamp are required"
	}
	sv, err := slack.NewSecretsVerifier(header, secret)
	switch {
	case errors.Is(err, slack.ErrExpiredTimestamp):
		return "old_timestamp", "X-Slack-Request-Timestamp is more than five minutes away"
	case err != nil:
		return "bad_signature", "X-Slack-Signature or X-Slack-Request-Timestamp is malformed"
	}
	sv.Write(body)
	if sv.Ensure() != nil {
		return "bad_signature", "X-Slack-Signature does not match the body (check RETRYAUDIT_SLACK_SIGNING_SECRET)"
	}
	return "", ""
}

// fail answers an error as the API does: a code and a message.
func fail(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}
