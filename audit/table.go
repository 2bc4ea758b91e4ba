package audit

// The transitions of a ledger entry, written down once: the state it is in,
// what happened, and who it came from, to what it becomes, the answer, and
// what is written beside it. Every decision the ledger makes about an
// entry is a row of this table (rowFor); the rest of the code finds out the
// state and who (identify, whoFor) and writes what the row says (apply).
// The first row that matches wins; "*" matches anything.
//
// States: an entry is new (no row), processing, done, failed or cancelled;
// ":contradiction" is a processing entry whose holder contradicted a
// person's resolution (it waits for a person), ":person" a done or failed
// entry a person settled last.
//
// Who: the holder (its run stamp, or n8n's API asked now, shows that it is
// the execution holding the entry); holder? (the holder's id, but nothing
// shows it is that execution: no stamp, n8n silent); retry (an n8n Retry
// of the holder, at any depth, by n8n's word or a replayed stamp); other
// (any other execution); person; detector (the stale detector).

// State is an entry's state as the table reads it.
type State string

// The states.
const (
	StNew            State = "new"
	StProcessing     State = "processing"
	StContradicted   State = "processing:contradiction"
	StDone           State = "done"
	StDoneByPerson   State = "done:person"
	StFailed         State = "failed"
	StFailedByPerson State = "failed:person"
	StCancelled      State = "cancelled"
	anyProcessing    State = "processing*"
	anyDone          State = "done*"
	anyFailed        State = "failed*"
	anyState         State = "*"
)

// Act is what happened to an entry.
type Act string

// The acts.
const (
	ActClaim         Act = "claim"
	ActDone          Act = "done"
	ActFailed        Act = "failed"
	ActUnknown       Act = "unknown"
	ActError         Act = "error"
	ActStale         Act = "stale"
	ActResolveDone   Act = "resolve:done"
	ActResolveFailed Act = "resolve:failed"
	ActCancel        Act = "cancel"
	ActRetry         Act = "retry"
	anyOutcome       Act = "done|failed|unknown"
	doneOrUnknown    Act = "done|unknown"
	failedOrUnknown  Act = "failed|unknown"
	anyResolve       Act = "resolve:*"
	anyAct           Act = "*"
)

// Who is who an act came from, seen from the entry.
type Who string

// Who acts.
const (
	WhoHolder   Who = "holder"
	WhoUnproven Who = "holder?"
	WhoRetry    Who = "retry"
	WhoOther    Who = "other"
	WhoPerson   Who = "person"
	WhoDetector Who = "detector"
	holderish   Who = "holder|holder?"
	holderOrRe  Who = "holder|holder?|retry"
	anyone      Who = "*"
)

// Answer is what a row answers.
type Answer string

// The answers.
const (
	AnsClaimed    Answer = "claimed"
	AnsReclaimed  Answer = "reclaimed"
	AnsHeld       Answer = "held"
	AnsInProgress Answer = "in_progress"
	AnsDuplicate  Answer = "duplicate"
	AnsCancelled  Answer = "cancelled"
	AnsChanged    Answer = "changed"   // the act moved the entry
	AnsUnchanged  Answer = "unchanged" // accepted; it moved nothing (a resend, agreement, a kept contradiction)
	AnsNotHolder  Answer = "not_holder"
	AnsConflict   Answer = "conflict" // the state does not allow it
	AnsNotFound   Answer = "not_found"
	AnsRecorded   Answer = "recorded" // an error or a stale check: written down
)

// Row is one transition.
type Row struct {
	State  State
	Act    Act
	Who    Who
	Next   Status // the status it becomes; "" keeps it
	Take   bool   // the acting execution becomes the holder (a takeover starts the entry's age again)
	Review string // the review reason it sets; "-" clears it; "" keeps it
	Answer Answer
	Line   string // the history line's kind; "" writes none
	Alert  string // the alert it writes (its thread's first message, or a reply); "" none
	News   bool   // a reply in the entry's thread, when people were alerted about it
	Why    string
}

// clearReview is Row.Review's value that clears the review reason;
// nextOutcome is Row.Next's value for the status the report names.
const (
	clearReview        = "-"
	nextOutcome Status = "=outcome"
)

// Table is every transition of a ledger entry.
var Table = []Row{
	// Claims.
	{StNew, ActClaim, anyone, StatusProcessing, true, "", AnsClaimed, KindClaim, "", false,
		"a new key: the caller is first"},
	{anyFailed, ActClaim, anyone, StatusProcessing, true, clearReview, AnsReclaimed, KindClaim, "", true,
		"it certainly did not happen: the caller captures it"},
	{StProcessing, ActClaim, WhoHolder, "", false, "", AnsHeld, KindClaim, "", false,
		"the holder again (a resend within its run): a lost answer must not lock it out"},
	{StContradicted, ActClaim, WhoHolder, "", false, "", AnsHeld, KindClaim, "", false,
		"the holder again: it holds it, a person decides its outcome"},
	{anyProcessing, ActClaim, WhoUnproven, "", false, "", AnsInProgress, KindClaim, "", false,
		"the holder's id, but nothing shows it is that execution (no run stamp, n8n silent): nothing granted"},
	{StProcessing, ActClaim, WhoRetry, "", true, clearReview, AnsHeld, KindClaim, "", true,
		"an n8n Retry of the holder takes over: a fresh claim"},
	{anyProcessing, ActClaim, anyone, "", false, "", AnsInProgress, KindClaim, "", false,
		"another execution holds it (or its contradiction waits for a person): do nothing"},
	{anyDone, ActClaim, anyone, "", false, "", AnsDuplicate, KindClaim, "", false,
		"it happened: do nothing"},
	{StCancelled, ActClaim, anyone, "", false, "", AnsCancelled, KindClaim, "", false,
		"a person said never to act on it"},

	// Outcome reports.
	{StNew, anyOutcome, anyone, "", false, "", AnsNotFound, "", "", false,
		"no such entry"},
	{StContradicted, anyOutcome, holderOrRe, "", false, "", AnsUnchanged, "", "", false,
		"its contradiction of a person's resolution is kept: a person decides"},
	{StProcessing, ActUnknown, holderOrRe, "", true, ReviewUnknown, AnsChanged, KindOutcome, AlertUnknown, false,
		"a timeout after sending: it stays processing and waits for a person"},
	{StProcessing, anyOutcome, holderOrRe, nextOutcome, true, clearReview, AnsChanged, KindOutcome, "", true,
		"the holder (or a Retry of it) settles it"},
	{anyProcessing, doneOrUnknown, anyone, "", false, ReviewNotHolder, AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted: a person looks"},
	{anyProcessing, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", true,
		"a stray failed changes no risk"},
	{StDoneByPerson, failedOrUnknown, holderOrRe, "", false, "", AnsConflict, KindContradiction, AlertContradiction, false,
		"the holder contradicts a person's done: the order the person believed in may not exist"},
	{anyDone, ActDone, holderish, "", false, "", AnsUnchanged, "", "", false,
		"the same outcome again"},
	{anyDone, anyOutcome, holderOrRe, "", false, "", AnsConflict, "", "", false,
		"done is final"},
	{anyDone, doneOrUnknown, anyone, "", false, "", AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted: a second order may exist"},
	{anyDone, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", true,
		"a stray failed changes no risk"},
	{anyFailed, ActUnknown, WhoRetry, StatusProcessing, true, ReviewUnknown, AnsChanged, KindOutcome, AlertUnknown, false,
		"a Retry of the holder acted again and cannot tell"},
	{anyFailed, anyOutcome, WhoRetry, nextOutcome, true, clearReview, AnsChanged, KindOutcome, "", true,
		"a Retry of the holder acted again: its outcome settles it"},
	{StFailedByPerson, doneOrUnknown, holderish, StatusProcessing, false, ReviewContradiction, AnsChanged, KindContradiction,
		AlertContradiction, false,
		"the holder contradicts a person's failed: the CRM may have the order; it waits for a person again"},
	{anyFailed, ActFailed, holderish, "", false, "", AnsUnchanged, "", "", false,
		"the same outcome again"},
	{anyFailed, anyOutcome, holderish, "", false, "", AnsConflict, "", "", false,
		"failed is left only by a new claim or a Retry"},
	{anyFailed, doneOrUnknown, anyone, "", false, "", AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted"},
	{anyFailed, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", true,
		"a stray failed changes no risk"},
	{StCancelled, doneOrUnknown, holderOrRe, "", false, "", AnsUnchanged, KindContradiction, AlertContradiction, false,
		"the holder acted on an event a person cancelled: kept as a contradiction"},
	{StCancelled, ActFailed, holderOrRe, "", false, "", AnsUnchanged, "", "", false,
		"nothing happened, as the person wanted"},
	{StCancelled, doneOrUnknown, anyone, "", false, "", AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted"},
	{StCancelled, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", false,
		"a stray failed changes no risk"},

	// Errors n8n reports (Error Trigger payloads, hooks, reconciliation).
	{anyProcessing, ActError, holderOrRe, "", false, ReviewError, AnsRecorded, KindError, AlertExecutionError, false,
		"the holder's run failed: the outcome is unknown, a person looks"},
	{anyProcessing, ActError, anyone, "", false, "", AnsRecorded, KindError, "", false,
		"another execution's error says nothing of this entry's outcome"},
	{anyState, ActError, anyone, "", false, "", AnsRecorded, KindError, "", true,
		"a settled entry: news for the people watching it"},

	// The stale detector.
	{StProcessing, ActStale, WhoDetector, "", false, "", AnsRecorded, KindStale, AlertStale, false,
		"processing too long without an outcome"},

	// People.
	{anyProcessing, ActResolveDone, WhoPerson, StatusDone, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person found the order"},
	{anyProcessing, ActResolveFailed, WhoPerson, StatusFailed, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person found no order: the next delivery may act"},
	{StCancelled, ActCancel, WhoPerson, "", false, "", AnsUnchanged, "", "", false,
		"cancelled already"},
	{anyDone, ActCancel, WhoPerson, "", false, "", AnsConflict, "", "", false,
		"done is final"},
	{anyProcessing, ActCancel, WhoPerson, StatusCancelled, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person says never to act on it"},
	{anyFailed, ActCancel, WhoPerson, StatusCancelled, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person says never to act on it"},
	{anyState, anyResolve, WhoPerson, "", false, "", AnsConflict, "", "", false,
		"only a processing entry is resolved"},
	{anyFailed, ActRetry, WhoPerson, "", false, "", AnsChanged, KindRetry, "", true,
		"a person asks n8n to retry the failed execution: written first, so a form shown before it is stale; the Retry's report settles it"},
	{anyState, ActRetry, WhoPerson, "", false, "", AnsConflict, "", "", false,
		"only a failed entry is retried: a retry of a processing, done or cancelled entry is never sent"},
}

// rowFor returns the first row of Table that matches; ok is false when
// none does (a combination the ledger never meets).
func rowFor(s State, a Act, w Who) (Row, bool) {
	for _, r := range Table {
		if r.State.matches(s) && r.Act.matches(a) && r.Who.matches(w) {
			return r, true
		}
	}
	return Row{}, false
}

func (p State) matches(s State) bool {
	switch p {
	case anyState:
		return s != StNew
	case anyProcessing:
		return s == StProcessing || s == StContradicted
	case anyDone:
		return s == StDone || s == StDoneByPerson
	case anyFailed:
		return s == StFailed || s == StFailedByPerson
	}
	return p == s
}

func (p Act) matches(a Act) bool {
	switch p {
	case anyAct:
		return true
	case anyOutcome:
		return a == ActDone || a == ActFailed || a == ActUnknown
	case doneOrUnknown:
		return a == ActDone || a == ActUnknown
	case failedOrUnknown:
		return a == ActFailed || a == ActUnknown
	case anyResolve:
		return a == ActResolveDone || a == ActResolveFailed
	}
	return p == a
}

func (p Who) matches(w Who) bool {
	switch p {
	case anyone:
		return true
	case holderish:
		return w == WhoHolder || w == WhoUnproven
	case holderOrRe:
		return w == WhoHolder || w == WhoUnproven || w == WhoRetry
	}
	return p == w
}

// StateOf is an entry's state as the table reads it.
func StateOf(e *Entry) State {
	switch {
	case e == nil || !e.Stored && e.Status == "":
		return StNew
	case e.Status == StatusProcessing && e.Review == ReviewContradiction:
		return StContradicted
	case e.Status == StatusDone && e.ResolvedBy != "":
		return StDoneByPerson
	case e.Status == StatusFailed && e.ResolvedBy != "":
		return StFailedByPerson
	}
	return State(e.Status)
}
