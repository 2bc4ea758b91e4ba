package notify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/slack-go/slack"

	"github.com/retryaudit/retryaudit/audit"
)

// MetadataEventType marks the messages retryaudit posts, in Slack's message
// metadata; the payload holds the outbox row's id and the database's origin.
const MetadataEventType = "retryaudit_alert"

// result is how an attempt ended: an Attempt to record, or the row given
// back untouched (the channel is paused, or the worker is stopping).
type result struct {
	attempt audit.Attempt
	release bool
	due     time.Time
}

func ended(a audit.Attempt) result { return result{attempt: a} }

// attempt sends one row. ctx is the worker's (it ends at the stop), actx
// the attempt's own, which outlives the stop for StopGrace.
func (w *Worker) attempt(ctx, actx context.Context, row audit.OutboxRow) result {
	if w.Notifier == nil {
		return ended(audit.Attempt{State: audit.OutboxUnconfigured, LastError: NotConfigured})
	}
	a, err := row.Alert()
	if err != nil {
		return ended(w.dead(row, "the row's alert does not decode: "+err.Error()))
	}
	p, err := w.plan(actx, row, a)
	switch {
	case err != nil:
		w.databaseFailed("plan a message", err)
		return ended(w.failed(row, true, err))
	case p.skip != "":
		return ended(audit.Attempt{State: audit.OutboxSkipped, LastError: p.skip})
	}
	if p.msg.Metadata, err = w.metadata(actx, row); err != nil {
		w.databaseFailed("read the origin's mark", err)
		return ended(w.failed(row, true, err))
	}
	channel := cmp.Or(p.msg.Channel, w.Notifier.Channel())
	if r, wait, err := w.waitSlot(ctx, actx, channel); err != nil || wait {
		if err != nil {
			w.databaseFailed("take the channel's send slot", err)
			return ended(w.failed(row, true, err))
		}
		return r
	}
	if row.MaybeSent && p.msg.UpdateTS == "" {
		posted, found, err := w.find(actx, row, channel, p.msg)
		switch {
		case err != nil:
			if RetryAfter(err) <= 0 {
				w.slackFailed(row.ID, err)
			}
			return ended(w.failed(row, true, err))
		case found:
			w.slackAnswered()
			return ended(w.sent(row, p, posted))
		}
	}
	posted, retry, err := w.Notifier.Notify(actx, p.msg)
	if err != nil && Oversized(err) {
		// Our defect, not the alert's: say so loudly, and still tell people.
		w.Log.Error("outbox: Slack refused the message as built; sending a minimal one instead",
			"row", row.ID, "err", err)
		fb := w.Renderer.fallback(a, row.ID)
		fb.Channel, fb.ThreadTS, fb.UpdateTS, fb.Metadata = p.msg.Channel, p.msg.ThreadTS, p.msg.UpdateTS, p.msg.Metadata
		if r, wait, err := w.waitSlot(actx, actx, channel); err != nil || wait {
			if err != nil {
				return ended(w.failed(row, true, err))
			}
			return r
		}
		posted, retry, err = w.Notifier.Notify(actx, fb)
	}
	if err != nil {
		w.pause(actx, channel, err)
		if retry && RetryAfter(err) <= 0 {
			w.slackFailed(row.ID, err) // a rate limit is pacing, not an outage
		}
		return ended(w.failed(row, retry, err))
	}
	w.slackAnswered()
	return ended(w.sent(row, p, posted))
}

// sent records a posted message, and the thread it opened.
func (w *Worker) sent(row audit.OutboxRow, p plan, posted Posted) audit.Attempt {
	return audit.Attempt{State: audit.OutboxSent, Destination: posted.Channel, MessageID: posted.TS,
		Root: w.opened(row, p, posted)}
}

// metadata marks a message as the row's, and this database's: two
// retryaudit installations posting to one channel never take each other's
// messages for their own.
func (w *Worker) metadata(ctx context.Context, row audit.OutboxRow) (*slack.SlackMetadata, error) {
	w.mu.Lock()
	origin := w.origin
	w.mu.Unlock()
	if origin == "" {
		key, err := w.Store.Secret(ctx, "slack-origin")
		if err != nil {
			return nil, err
		}
		origin = fmt.Sprintf("%x", key[:8])
		w.mu.Lock()
		w.origin = origin
		w.mu.Unlock()
	}
	return &slack.SlackMetadata{EventType: MetadataEventType, EventPayload: map[string]any{
		"outbox_id": strconv.FormatInt(row.ID, 10), "origin": origin,
	}}, nil
}

// waitSlot waits for the channel's next send slot, shared by every
// instance. A wait longer than a poll (the channel is paused after a 429)
// gives the row back until then; so does the stop (ctx).
func (w *Worker) waitSlot(ctx, actx context.Context, channel string) (result, bool, error) {
	for {
		took, next, err := w.Store.ClaimSlot(actx, channel, w.MinInterval)
		if err != nil || took {
			return result{}, false, err
		}
		wait := next.Sub(w.Now())
		if wait > w.Poll {
			return result{release: true, due: next}, true, nil
		}
		select {
		case <-ctx.Done():
			return result{release: true, due: w.Now()}, true, nil
		case <-time.After(max(wait, time.Millisecond)):
		}
	}
}

// pause stops every instance from sending to the channel until the end of
// the Retry-After Slack answered.
func (w *Worker) pause(ctx context.Context, channel string, err error) {
	after := RetryAfter(err)
	if after <= 0 {
		return
	}
	if perr := w.Store.PauseChannel(ctx, channel, w.Now().Add(after)); perr != nil {
		w.Log.Warn("outbox: cannot pause the channel after a 429", "channel", channel, "err", perr)
	}
}

// find looks for a message an earlier attempt may have posted.
func (w *Worker) find(ctx context.Context, row audit.OutboxRow, channel string, m Message) (Posted, bool, error) {
	f, ok := w.Notifier.(Finder)
	if !ok {
		if w.once("cannot find") {
			w.Log.Warn("outbox: an attempt may have posted its message already; an incoming webhook cannot look, "+
				"so it is posted again and a duplicate is possible", "row", row.ID)
		}
		return Posted{}, false, nil
	}
	since := row.CreatedAt
	if row.FirstAttemptAt.Valid {
		since = row.FirstAttemptAt.Time
	}
	posted, found, err := f.Find(ctx, m, since)
	switch {
	case errors.Is(err, ErrNoHistory):
		if w.once("no history") {
			w.Log.Warn("outbox: an attempt may have posted its message already, and the bot token may not read the "+
				"channel's history (add channels:history or groups:history): it is posted again and a duplicate is possible",
				"row", row.ID, "channel", channel)
		}
		return Posted{}, false, nil
	case errors.Is(err, ErrCannotLook):
		// Looking again would hold the message back until it dead-letters
		// a day later, and nobody would know: post it (with its metadata,
		// so that a lookup that works again finds it) and say what to fix.
		if w.once("cannot look: " + err.Error()) {
			w.Log.Warn("outbox: an attempt may have posted its message already, and the channel's history cannot be "+
				"read to find out: it is posted again and a duplicate is possible", "row", row.ID, "channel", channel,
				"err", err)
		}
		return Posted{}, false, nil
	case err != nil:
		w.pause(ctx, channel, err)
		return Posted{}, false, err
	case found:
		w.Log.Info("outbox: an earlier attempt had posted the message; it is recorded, not posted again",
			"row", row.ID, "ts", posted.TS)
	}
	return posted, found, nil
}

// failed schedules the next attempt of a row, or dead-letters it. A row
// that may have been posted stays marked so until a later attempt finds or
// posts it.
func (w *Worker) failed(row audit.OutboxRow, retry bool, err error) audit.Attempt {
	now := w.Now()
	reason := err.Error()
	if ConfigError(err) {
		reason = audit.DeadConfigPrefix + reason
	}
	if !retry {
		return w.dead(row, reason)
	}
	if now.Sub(row.CreatedAt) > w.GiveUpAfter {
		return w.dead(row, fmt.Sprintf("gave up after %d attempts over %s: %s", row.Attempts, w.GiveUpAfter, reason))
	}
	delay := RetryAfter(err)
	if delay <= 0 {
		delay = w.backoff(row.Attempts)
	}
	w.Log.Debug("outbox: will retry", "row", row.ID, "attempt", row.Attempts, "in", delay, "err", err)
	return audit.Attempt{State: audit.OutboxPending, RetryAt: now.Add(delay), LastError: reason,
		MaybeSent: row.MaybeSent || MaybeSent(err)}
}

// backoff doubles from BaseBackoff per attempt up to MaxBackoff, with ±20%
// jitter so that rows failing together do not retry together.
func (w *Worker) backoff(attempts int) time.Duration {
	d := w.BaseBackoff
	for i := 1; i < attempts && d < w.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.MaxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// dead dead-letters a row, logging each reason once: a revoked token
// dead-letters every row for the same reason.
func (w *Worker) dead(row audit.OutboxRow, reason string) audit.Attempt {
	if w.once("dead: " + reason) {
		name := "Slack"
		if w.Notifier != nil {
			name = w.Notifier.Name()
		}
		w.Log.Error("outbox: a message cannot be delivered; it is kept as dead", "row", row.ID,
			"destination", name, "reason", reason)
	}
	return audit.Attempt{State: audit.OutboxDead, LastError: reason}
}
