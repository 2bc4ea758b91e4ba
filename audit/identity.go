package audit

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// An execution is (instance, workflow, execution id) and the moment n8n
// started it. n8n numbers executions in its database: restored from a
// backup, or moved to a new one, it hands out the ids again, and execution
// 31 of tomorrow is not execution 31 of last week. The service keeps the
// first execution under the id n8n gave and each later one that reuses it
// under the id with "~" and a count: "31~2" (before the instance's
// qualifier: "31~2@staging"). Lineage, holds and outcomes recorded for one
// never apply to another.

// IncarnationSep joins an n8n execution id to the count of executions
// that used it before.
const IncarnationSep = "~"

var incarnationSuffix = regexp.MustCompile(`~[0-9]+$`)

// IncarnationID returns the id under which the service keeps the n-th
// execution that n8n gave the id qid (qualified with its instance).
func IncarnationID(qid string, n int) string {
	if n <= 1 {
		return qid
	}
	id, instance, _ := strings.Cut(qid, InstanceSep)
	out := id + IncarnationSep + strconv.Itoa(n)
	if instance != "" {
		out += InstanceSep + instance
	}
	return out
}

// N8NID returns the id n8n gave an execution the service keeps as id
// (qualified with its instance): the id without the incarnation count.
func N8NID(id string) string {
	base, instance, _ := strings.Cut(id, InstanceSep)
	base = incarnationSuffix.ReplaceAllString(base, "")
	if instance != "" {
		return base + InstanceSep + instance
	}
	return base
}

// The kinds of sighting: what presents an execution id.
const (
	SeenClaim     = "claim"
	SeenOutcome   = "outcome"
	SeenError     = "error"
	SeenHookStart = "hook_start"
	SeenHookEnd   = "hook_end"
)

// KnownExecution is what the service knows of the execution it keeps under
// an id n8n gave.
type KnownExecution struct {
	ID         string
	WorkflowID string
	FirstSeen  time.Time
	LastSeen   time.Time
	StartedAt  time.Time // n8n's word; zero when n8n never said
	Ended      bool      // n8n said it finished (not waiting)
	Waiting    bool      // n8n said it waits (a Wait node): it resumes under its id
}

// Sighting is a request that presents an execution id.
type Sighting struct {
	Kind       string
	WorkflowID string
	// StartedAt is when n8n says the execution that has the id now
	// started: from its API, or from its hooks; zero when not asked.
	StartedAt time.Time
}

// The verdicts on a sighting.
const (
	SameExecution  = iota // the execution the service knows
	NewExecution          // another one, reusing the id
	OtherExecution        // another one, and nothing says the known one is over: refused
)

// Clock tolerances: n8n's clock and the service's may differ by this much
// (clockSkew); two reports of one start by n8n itself differ by less than
// startJitter (its hooks and its database take their times a few
// milliseconds apart).
const (
	clockSkew   = 5 * time.Second
	startJitter = time.Second
)

// Judge decides whether a sighting of an id is of the execution the service
// knows by it, and says why when it is not. maxRun is the longest an
// execution runs: an id unseen for longer names a new one. What n8n said
// decides first: a start time that is not the known execution's, or a
// known execution that n8n said finished presenting itself again (n8n never
// runs an execution twice; a Wait node's resumption is not an end). A
// workflow id that differs names another execution: a new one when the
// known one is over, else one the service cannot tell apart (two n8n
// instances sharing ids), which is refused.
func Judge(k KnownExecution, s Sighting, now time.Time, maxRun time.Duration) (int, string) {
	switch {
	case k.Waiting && !k.Ended && !s.StartedAt.IsZero() && !s.StartedAt.Before(k.StartedAt.Add(-startJitter)):
		// A waiting execution resumes under its id, perhaps with its
		// resumption's start time.
	case !s.StartedAt.IsZero() && !k.StartedAt.IsZero() && absDuration(s.StartedAt.Sub(k.StartedAt)) > startJitter:
		return NewExecution, fmt.Sprintf("n8n says execution %s started at %s; the one the service knows started at %s",
			N8NID(k.ID), s.StartedAt.UTC().Format(time.RFC3339), k.StartedAt.UTC().Format(time.RFC3339))
	case !s.StartedAt.IsZero() && k.StartedAt.IsZero() && s.StartedAt.After(k.FirstSeen.Add(clockSkew)):
		return NewExecution, fmt.Sprintf("n8n says execution %s started at %s, after the service first saw that id (%s)",
			N8NID(k.ID), s.StartedAt.UTC().Format(time.RFC3339), k.FirstSeen.UTC().Format(time.RFC3339))
	case k.Ended && (s.Kind == SeenClaim || s.Kind == SeenOutcome || s.Kind == SeenHookStart):
		return NewExecution, fmt.Sprintf("n8n said execution %s had finished; a finished execution presents nothing again",
			N8NID(k.ID))
	case maxRun > 0 && now.Sub(k.LastSeen) > maxRun:
		return NewExecution, fmt.Sprintf("execution %s was last seen %s ago, longer than an execution runs (%s)",
			N8NID(k.ID), HumanDuration(now.Sub(k.LastSeen), " "), HumanDuration(maxRun, " "))
	case s.WorkflowID != "" && k.WorkflowID != "" && s.WorkflowID != k.WorkflowID:
		return OtherExecution, fmt.Sprintf("execution %s of workflow %s is not the execution %s the service knows "+
			"(workflow %s): a second n8n sharing ids, or one whose database was reset; nothing was recorded",
			N8NID(k.ID), s.WorkflowID, N8NID(k.ID), k.WorkflowID)
	}
	return SameExecution, ""
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
