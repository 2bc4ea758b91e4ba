package audit

import (
	"regexp"
	"strconv"
	"strings"
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
