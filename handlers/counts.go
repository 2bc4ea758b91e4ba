package handlers

import (
	"context"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// countsTTL is how long the list page reuses the counts per status:
// counting a million rows takes about 100 ms, and the list is reloaded often.
const countsTTL = 10 * time.Second

// countCache keeps the last counts per status for a short while.
type countCache struct {
	mu      sync.Mutex
	counts  map[audit.Status]int
	expires time.Time
}

func (h *Handler) statusCounts(ctx context.Context) (map[audit.Status]int, error) {
	h.counts.mu.Lock()
	defer h.counts.mu.Unlock()
	now := h.cfg.Now()
	if h.counts.counts != nil && now.Before(h.counts.expires) {
		return h.counts.counts, nil
	}
	counts, err := h.store.StatusCounts(ctx)
	if err != nil {
		return nil, err
	}
	h.counts.counts, h.counts.expires = counts, now.Add(countsTTL)
	return counts, nil
}
