package retries

// N8NForTest returns the retrier's n8n, for a second retrier in tests.
func (r *Retrier) N8NForTest() N8N { return r.cfg.N8N }
