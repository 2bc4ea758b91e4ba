package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
)

// ClaimSlot takes the next moment to send to a channel for the caller, if it
// has come: the channel's next allowed time is kept in the database, so that
// every instance together keeps to one message per interval. It reports
// whether the slot was taken and, when it was not, when the next one is.
// Of two instances claiming at once, the conditional update lets one win.
func (s *Store) ClaimSlot(ctx context.Context, channel string, interval time.Duration) (bool, time.Time, error) {
	now := s.now()
	var next time.Time
	var took bool
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		took, err = s.namedGet(ctx, tx, &next, "claim channel slot", s.q.ChannelClaimSlot, map[string]any{"channel": channel, "next": s.t(now.Add(interval)), "now": s.t(now)})
		if err != nil || took {
			return err
		}
		return s.one(ctx, tx, &next, "read channel slot", s.q.ChannelReadSlot, map[string]any{"channel": channel})
	})
	return took, next, err
}

// PauseChannel keeps every instance from sending to a channel before until
// (Slack answered 429 with Retry-After). A pause never shortens a longer one.
func (s *Store) PauseChannel(ctx context.Context, channel string, until time.Time) error {
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		_, err := s.namedExec(ctx, tx, "pause channel", s.q.ChannelPause,
			map[string]any{"channel": channel, "until": s.t(until)})
		return err
	})
}
