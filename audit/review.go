package audit

// ResolveRequest is a person's decision about an entry whose outcome the
// workflow could not tell.
type ResolveRequest struct {
	Source  string
	EventID string
	Item    string
	To      Status // done (the order exists) or failed (it does not: a retry is safe)
	Actor   string
	Note    string
	CRMRef  string // the CRM's order, when the person found it
	// Holder is the holder the person saw: a resolution is fenced by it,
	// so that an entry taken over since the page was loaded is not moved.
	Holder string
	// Confirmed says that no execution is still running the action; it is
	// required for an entry that does not wait for review (a running claim).
	Confirmed bool
	// Version is the entry's version the person saw: a resolution is
	// refused once the entry moved on (0: fenced by Holder alone).
	Version int64
	// Via is how the person acted: page (the default), api or slack; the
	// resolution's history line keeps it (Delivery).
	Via string
}

// Validate checks every field and names each bad one.
func (r ResolveRequest) Validate() error {
	f := FieldErrors{}
	f.source("source", r.Source)
	f.text("event_id", r.EventID, true, MaxEventIDLen)
	f.text("item", r.Item, false, MaxItemLen)
	if r.To != StatusDone && r.To != StatusFailed && r.To != StatusCancelled {
		f.Add("to", "must be done, failed or cancelled")
	}
	if r.Version < 0 {
		f.Add("version", "must not be negative")
	}
	f.text("actor", r.Actor, true, MaxNameLen)
	f.note("note", r.Note, true, MaxTextLen)
	f.text("crm_ref", r.CRMRef, false, MaxNameLen)
	f.id("holder", r.Holder, false)
	if r.Via != "" && r.Via != ViaPage && r.Via != ViaAPI && r.Via != ViaSlack {
		f.Add("via", "must be page, api or slack")
	}
	return f.Err()
}

// RetryRequest is a person's request that n8n retry an entry's failed
// execution ("Retry in n8n"), fenced by the entry's version the person
// saw: it is written in the ledger before n8n is asked.
type RetryRequest struct {
	Source  string
	EventID string
	Item    string
	Version int64 // the entry's version the person saw (required)
	Actor   string
	Via     string // page, api or slack
	// ExecutionID is the failed execution n8n is asked to retry.
	ExecutionID string
	// Run is the bulk run the retry is part of (0: none).
	Run int64
}

// Validate checks every field and names each bad one.
func (r RetryRequest) Validate() error {
	f := FieldErrors{}
	f.source("source", r.Source)
	f.text("event_id", r.EventID, true, MaxEventIDLen)
	f.text("item", r.Item, false, MaxItemLen)
	if r.Version <= 0 {
		f.Add("version", "required: the entry's version you saw (a positive number)")
	}
	f.text("actor", r.Actor, true, MaxNameLen)
	if r.Via != "page" && r.Via != "api" && r.Via != "slack" {
		f.Add("via", "must be page, api or slack")
	}
	if r.Run < 0 {
		f.Add("run", "must not be negative")
	}
	f.id("execution_id", r.ExecutionID, true)
	return f.Err()
}
