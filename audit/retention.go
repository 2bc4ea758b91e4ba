package audit

// Pruned counts what one Prune deleted.
type Pruned struct {
	Events     int64 // done entries, with their items, history, errors and alerts
	Errors     int64 // errors linked to no event
	Executions int64 // executions nothing refers to any more
	Payloads   int64 // raw payloads dropped (the summaries stay)
}
