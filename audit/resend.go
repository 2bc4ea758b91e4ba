package audit

import (
	"time"
)

// DeadConfigPrefix starts the reason of a row dead-lettered for an error that
// a change of Slack configuration can cure (a revoked token, an unknown
// channel): such rows are sent again after the configuration changes.
const DeadConfigPrefix = "configuration: "

// ResendWindow is how far back rows are queued again after the Slack
// configuration changed; older ones stay as they are, visible on the pages.
const ResendWindow = 24 * time.Hour

// Waiting counts the alerts that wait to be sent.
type Waiting struct {
	Pending int // due now or later, or being sent
	// Resend is how many more the next start queues again, because the
	// configuration differs from the one they failed with.
	Resend int
}
