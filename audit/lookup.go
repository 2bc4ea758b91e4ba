package audit

import "fmt"

// The answers of a CRM lookup, a lookup line's Decision.
const (
	LookupFound    = "found"
	LookupNotFound = "not_found"
	LookupError    = "error"
)

// The ways a person acts: a person line's Delivery says which.
const (
	ViaPage  = "page"
	ViaAPI   = "api"
	ViaSlack = "slack"
)

// LookupRecord is what a CRM lookup found for an entry, asked by a person:
// written in the event's history as a line of kind lookup. It moves
// nothing, so the entry's version stays: a form loaded before it is still
// good.
type LookupRecord struct {
	Source  string
	EventID string
	Item    string
	Actor   string
	Via     string // page, api or slack
	Result  string // found, not_found or error
	CRMRef  string // the order's reference, when found
	Message string // what the CRM answered, in words (the error, a cut answer)
	// Version is the entry's version before the CRM was asked (0: not
	// fenced). An entry that moved while the CRM answered is recorded as
	// an error: the answer may predate the change (an order the holder
	// made meanwhile), and a "not found" steers a person to a retry.
	Version int64
}

// Validate checks every field and names each bad one.
func (r LookupRecord) Validate() error {
	f := FieldErrors{}
	f.source("source", r.Source)
	f.text("event_id", r.EventID, true, MaxEventIDLen)
	f.text("item", r.Item, false, MaxItemLen)
	f.text("actor", r.Actor, true, MaxNameLen)
	switch r.Via {
	case ViaPage, ViaAPI, ViaSlack:
	default:
		f.Add("via", "must be page, api or slack")
	}
	switch r.Result {
	case LookupFound, LookupNotFound, LookupError:
	default:
		f.Add("result", "must be found, not_found or error")
	}
	return f.Err()
}

// Stored is the record as it is kept: what the CRM sent, redacted and cut
// to the lengths the history holds.
func (r LookupRecord) Stored(red Redactor) LookupRecord {
	r.CRMRef, _ = CleanText(r.CRMRef)
	r.Message, _ = CleanText(r.Message)
	r.CRMRef = Truncate(red.RedactText(r.CRMRef), MaxNameLen)
	r.Message = Truncate(red.RedactText(r.Message), MaxTextLen)
	return r
}

// Lookup writes a person's CRM lookup in the entry's history. It is not a
// transition: the entry, its version and its holder stay as they are. An
// entry that moved since r.Version turns r into an error, written and
// left in r for the caller to answer with.
func (d *Decider) Lookup(r *LookupRecord) error {
	e := d.snap.Entries[EntryKey{Source: r.Source, EventID: r.EventID, Item: r.Item}]
	if !exists(e) {
		return Errorf(CodeNotFound, "no event %s/%s", r.Source, r.EventID)
	}
	row := d.decide(e, ActLookup, WhoPerson)
	if r.Version != 0 && e.Version != r.Version {
		r.Result, r.CRMRef = LookupError, ""
		r.Message = Truncate(fmt.Sprintf("the entry changed while the CRM was asked (version %d, now %d): "+
			"its answer may predate the change; look it up again", r.Version, e.Version), MaxTextLen)
	}
	d.line(e, HistoryLine{Kind: row.Line, ExecutionID: e.Holder, Decision: r.Result, Delivery: r.Via, Actor: r.Actor,
		Message: r.Message, CRMRef: r.CRMRef})
	return nil
}
