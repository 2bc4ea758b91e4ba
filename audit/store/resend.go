package store

import (
	"context"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

const fingerprintState = "slack.fingerprint"

// ResendAfterChange records the fingerprint of the Slack configuration (a
// hash of token, channel or webhook: never the secret itself) and, when it
// differs from the one recorded before, queues again the rows of the last
// ResendWindow that were not sent for want of a working configuration. They
// go out oldest first, paced like any other. Of several instances starting
// with the new configuration, one queues them. An empty fingerprint means
// Slack is not configured: it is recorded, nothing is queued.
func (s *Store) ResendAfterChange(ctx context.Context, fingerprint string) (int, error) {
	now := s.now()
	var n int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		n = 0
		var name string
		changed, err := s.namedGet(ctx, tx, &name, "record Slack fingerprint", s.q.StateChanged, map[string]any{"name": fingerprintState, "value": fingerprint, "now": s.t(now)})
		if err != nil || !changed || fingerprint == "" {
			return err
		}
		n, err = s.namedExec(ctx, tx, "queue alerts again", s.q.OutboxQueueAgain, map[string]any{"now": s.t(now), "since": s.t(now.Add(-audit.ResendWindow)),
			"config_errors": audit.DeadConfigPrefix + "%", "why": "queued again: the Slack configuration changed"})
		return err
	})
	if n > 0 {
		s.nudge()
	}
	return int(n), err
}

// WaitingAlerts counts what waits to be sent with the Slack configuration
// whose fingerprint is given.
func (s *Store) WaitingAlerts(ctx context.Context, fingerprint string) (audit.Waiting, error) {
	var w audit.Waiting
	if err := s.one(ctx, s.db, &w.Pending, "count outbox", s.q.OutboxCount, nil); err != nil {
		return w, err
	}
	stored, err := s.State(ctx, fingerprintState)
	if err != nil || stored == fingerprint || fingerprint == "" {
		return w, err
	}
	err = s.one(ctx, s.db, &w.Resend, "count outbox", s.q.OutboxWaitingAlerts,
		map[string]any{"since": s.t(s.now().Add(-audit.ResendWindow)), "config_errors": audit.DeadConfigPrefix + "%"})
	return w, err
}
