package retries

import "context"

// N8NForTest returns the retrier's n8n, for a second retrier in tests.
func (r *Retrier) N8NForTest() N8N { return r.cfg.N8N }

// Base sets the context the runs this retrier starts live in, as Watch
// does, without Watch's timing.
func (r *Retrier) Base(ctx context.Context) {
	r.mu.Lock()
	r.base = ctx
	r.mu.Unlock()
}
