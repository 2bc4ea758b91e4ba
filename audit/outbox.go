package audit

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The states of an outbox row.
const (
	OutboxPending      = "pending"
	OutboxSending      = "sending"      // leased by a worker
	OutboxSent         = "sent"         //
	OutboxDead         = "dead"         // a permanent error: last_error says which
	OutboxUnconfigured = "unconfigured" // no notifier configured when it was due
	OutboxSkipped      = "skipped"      // not needed any more: last_error says why
)

// OutboxRow is one message to send.
type OutboxRow struct {
	ID         int64
	CreatedAt  time.Time
	DueAt      time.Time
	ThreadKey  string
	Kind       string
	Source     string
	EventID    string
	ErrorID    sql.NullInt64
	Payload    string
	State      string
	Attempts   int
	LastError  string
	SentAt     sql.NullTime
	LeaseOwner string
	// Destination and MessageID say where the notifier posted the message
	// and its id there, in the notifier's own terms.
	Destination string
	MessageID   string
	// AttemptedBy names the worker that last attempted the row.
	AttemptedBy string
	// FirstAttemptAt is when the first attempt began.
	FirstAttemptAt sql.NullTime
	// MaybeSent says that the notifier may have posted the message already: an
	// attempt ended in a timeout or a reset connection, or the worker that
	// leased the row died with it.
	MaybeSent bool
}

// Alert decodes the row's payload.
func (r OutboxRow) Alert() (Alert, error) {
	var a Alert
	err := json.Unmarshal([]byte(r.Payload), &a)
	return a, err
}

// Attempt is how one attempt to send a row ended.
type Attempt struct {
	State     string    // OutboxSent, OutboxPending (retry), OutboxDead, OutboxUnconfigured, OutboxSkipped
	RetryAt   time.Time // for a retry
	LastError string
	// Destination and MessageID, for a sent row, say where the message went.
	Destination string
	MessageID   string
	// MaybeSent, for a retry, says that the notifier may have posted the message.
	MaybeSent bool
	// Root, for a sent row whose message opened its thread, is kept in the
	// same transaction as the row's state: a root is never lost between them.
	Root *ThreadRoot
}

// HeldBackAfter is how long an alert may wait to be sent before it counts
// as held back: longer than the grace of an unlinked error, the pacing of a
// busy channel and a few retries through a Slack blip.
const HeldBackAfter = 5 * time.Minute

// Stats are the figures the metrics and the self-check read.
type Stats struct {
	OutboxDepth     int
	OutboxOldestAge time.Duration
	// HeldBack counts the messages waiting longer than HeldBackAfter;
	// HeldBackError is what the oldest one's last attempt met ("" before
	// any attempt).
	HeldBack      int
	HeldBackError string
	ReviewQueue   int
}

// HeldBackNote says, when messages wait longer than HeldBackAfter, how
// many, since when and what their last attempt met, for the overview and
// the self-check: an alert nobody receives must not go unnoticed. It is ""
// when none waits.
func (st Stats) HeldBackNote() string {
	if st.HeldBack == 0 {
		return ""
	}
	what := "1 Slack message has"
	if st.HeldBack > 1 {
		what = strconv.Itoa(st.HeldBack) + " Slack messages have"
	}
	msg := fmt.Sprintf("%s waited more than %s to be sent (the oldest for %s).", what,
		HumanDuration(HeldBackAfter, " "), HumanDuration(st.OutboxOldestAge, " "))
	if st.HeldBackError != "" {
		msg += " The last attempt met: " + Truncate(st.HeldBackError, 300) + "."
	}
	return msg + " The log says what to fix."
}
