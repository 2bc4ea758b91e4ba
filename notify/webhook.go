package notify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Webhook sends with an incoming webhook: plain messages, no threads.
type Webhook struct {
	url  string
	http *http.Client
}

// NewWebhook returns a notifier posting to an incoming webhook URL; timeout
// bounds one post (DefaultTimeout when 0).
func NewWebhook(webhookURL string, timeout time.Duration) *Webhook {
	return &Webhook{url: webhookURL, http: &http.Client{Timeout: cmp.Or(timeout, DefaultTimeout)}}
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

// Channel names the webhook's channel for pacing: a webhook posts to one.
func (w *Webhook) Channel() string { return w.Name() }

// Notify posts m as a new message. Slack answers a webhook with a status
// and a word ("invalid_blocks", "no_service"), which is read to classify
// the failure.
func (w *Webhook) Notify(ctx context.Context, m Message) (Posted, bool, error) {
	msg := slack.WebhookMessage{Text: m.Text}
	if len(m.Blocks.BlockSet) > 0 {
		msg.Blocks = &m.Blocks
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return Posted{}, false, &sendError{msg: "slack: encode the message: " + err.Error(), oversized: true}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(raw))
	if err != nil {
		retry, clean := classify(err, w.url)
		return Posted{}, retry, clean
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.http.Do(req)
	if err != nil {
		retry, clean := classify(err, w.url)
		return Posted{}, retry, clean
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode == http.StatusOK {
		return Posted{}, false, nil
	}
	word := strings.TrimSpace(string(body))
	if len(word) > 64 || strings.ContainsAny(word, "<{ \n") {
		word = "" // an HTML page or JSON, not one of Slack's words
	}
	e := &sendError{msg: "slack: " + resp.Status}
	if word != "" {
		e.msg += ": " + word
	}
	retry := false
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		e.after, retry = time.Duration(secs)*time.Second, true
	case resp.StatusCode >= 500:
		e.maybe, retry = true, true
	case word != "":
		retry = apiError(e, word)
	}
	// A webhook that is forbidden, unknown or gone was revoked or deleted:
	// a new one cures it.
	switch resp.StatusCode {
	case http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		e.config = !e.oversized
	}
	return Posted{}, retry, e
}
