package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/retryaudit/retryaudit/audit"
)

// hookCallState names the service state that keeps an instance's last hook
// call.
func hookCallState(instance string) string { return "hooks.last_call." + instance }

// RecordHookCall keeps c as its instance's last hook call, stamped now.
func (s *Store) RecordHookCall(ctx context.Context, c audit.HookCall) error {
	c.At = s.now().UTC()
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("store: hook call: %w", err)
	}
	return s.SetState(ctx, hookCallState(c.Instance), string(b))
}

// LastHookCall returns the instance's last hook call; ok is false when its
// hooks never called.
func (s *Store) LastHookCall(ctx context.Context, instance string) (c audit.HookCall, ok bool, err error) {
	v, err := s.State(ctx, hookCallState(instance))
	if err != nil || v == "" {
		return c, false, err
	}
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return c, false, fmt.Errorf("store: the last hook call of %s is unreadable: %w", instance, err)
	}
	return c, true, nil
}
