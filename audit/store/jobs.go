package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/jmoiron/sqlx"
)

// TakeLease makes owner the holder of the named background job until ttl
// from now, if nobody else holds it or the holder's lease ran out: several
// instances on one database run each job once. The holder renews by taking
// it again before the lease runs out, and releases it when it stops.
func (s *Store) TakeLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	now := s.now()
	var held bool
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var got string
		var err error
		held, err = s.namedGet(ctx, tx, &got, "take lease", s.q.LeaseTake, map[string]any{"name": name, "owner": owner, "until": s.t(now.Add(ttl)), "now": s.t(now)})
		return err
	})
	return held, err
}

// ReleaseLease gives the named job up if owner holds it, so that another
// instance takes it at its next try instead of waiting for the lease to run
// out: a stopping instance calls it.
func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		_, err := s.namedExec(ctx, tx, "release lease", s.q.LeaseRelease,
			map[string]any{"name": name, "owner": owner})
		return err
	})
}

// State returns a value a background job kept, or "" when none is kept.
func (s *Store) State(ctx context.Context, name string) (string, error) {
	var v string
	err := s.one(ctx, s.db, &v, "read state", s.q.StateRead, map[string]any{"name": name})
	if isNoRows(err) {
		return "", nil
	}
	return v, err
}

// SetState keeps a value for a background job.
func (s *Store) SetState(ctx context.Context, name, value string) error {
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		_, err := s.namedExec(ctx, tx, "write state", s.q.StateWrite,
			map[string]any{"name": name, "value": value, "now": s.t(s.now())})
		return err
	})
}

// Secret returns a random secret shared by every instance on the database
// (the pages' CSRF key), creating it on first use.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	key := "secret." + name
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		_, err := s.namedExec(ctx, tx, "create secret", s.q.StateCreateSecret,
			map[string]any{"name": key, "value": hex.EncodeToString(fresh), "now": s.t(s.now())})
		return err
	})
	if err != nil {
		return nil, err
	}
	v, err := s.State(ctx, key)
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(v)
}
