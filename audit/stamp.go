package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// A run stamp is something only an execution's own run data holds. The
// shipped workflows' first node after the trigger makes it once per run:
// the execution's id, n8n's time and a random value, joined by ':'
// ("4711:1764925200123:k3j9x0"). Every claim and outcome of the run sends
// it. n8n's Retry replays the node's output instead of running it again,
// so a Retry presents the stamp of the execution it retries, whose id the
// stamp names, while a new execution (a redelivery, or a new execution
// reusing an id after n8n was restored) makes a stamp of its own. So:
//
//   - the same id with the same stamp is the same execution;
//   - the same id with another stamp is another execution;
//   - another id with a stamp another execution made replays that
//     execution's data: an n8n Retry of it, or a person's run in the
//     editor with pinned data (mode manual), which grants nothing.
//
// The service reads nothing in a stamp but the id before its first ':'.

// MaxStampLen caps a run stamp.
const MaxStampLen = 200

// StampMaker returns the n8n execution id a run stamp names (the one that
// made it), qualified like like (an id of the same n8n instance); "" when
// the stamp names none.
func StampMaker(stamp, like string) string {
	id, _, ok := strings.Cut(stamp, ":")
	if !ok || id == "" || IDProblem(id) != "" {
		return ""
	}
	if i := strings.LastIndex(like, InstanceSep); i >= 0 && !strings.Contains(id, InstanceSep) {
		id += like[i:]
	}
	return id
}

// stamp checks a run stamp: printable, no spaces, at most MaxStampLen.
func (f FieldErrors) stamp(field, v string) {
	if v == "" {
		return
	}
	if len(v) > MaxStampLen {
		f.Add(field, fmt.Sprintf("must be at most %d characters", MaxStampLen))
		return
	}
	for _, r := range v {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			f.Add(field, "must be printable characters without spaces")
			return
		}
	}
}

// StampTime returns n8n's time a run stamp names (the part after the id),
// the zero time when it names none.
func StampTime(stamp string) time.Time {
	_, rest, ok := strings.Cut(stamp, ":")
	if !ok {
		return time.Time{}
	}
	ms, _, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// ManualMode reports a mode of a person's run in the editor: n8n's own
// (manual) or the one $execution.mode gives (test). Such a run replays
// pinned data and is never an n8n Retry.
func ManualMode(mode string) bool { return mode == "manual" || mode == "test" }
