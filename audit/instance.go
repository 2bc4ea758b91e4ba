package audit

import (
	"errors"
	"regexp"
	"strings"
)

// DefaultInstance names the n8n instance of the single-instance settings
// (RETRYAUDIT_TOKEN, RETRYAUDIT_N8N_API_URL, …).
const DefaultInstance = "default"

// InstanceSep joins an id to the n8n instance it belongs to.
const InstanceSep = "@"

// n8n numbers executions per instance, and a staging and a production n8n
// (or one whose database was reset) hand out the same ids. So the service
// keeps the ids of every instance but the default qualified: execution 4711
// of staging is "4711@staging" in the ledger, its history, its errors and its
// links, and never meets execution 4711 of the default instance. Workflow
// ids are qualified the same way. With several instances configured, ids
// that n8n sends may not hold the separator themselves.

var instanceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// ValidInstance reports whether name can name an n8n instance: a lower-case
// letter, then up to 31 lower-case letters, digits or '-'.
func ValidInstance(name string) bool { return instanceName.MatchString(name) }

// QualifyID returns the id under which the service keeps an id of an
// instance: the id itself for the default instance (and for no id).
func QualifyID(instance, id string) string {
	if id == "" || instance == "" || instance == DefaultInstance {
		return id
	}
	return id + InstanceSep + instance
}

// SplitID returns the instance and the id n8n knows for an id the service
// keeps; known says which instance names exist. An id whose suffix names no
// known instance is the default instance's, whole.
func SplitID(qid string, known func(string) bool) (instance, id string) {
	i := strings.LastIndex(qid, InstanceSep)
	if i < 0 || known == nil || !known(qid[i+1:]) {
		return DefaultInstance, qid
	}
	return qid[i+1:], qid[:i]
}

// ErrNoAPI is what an ExecutionLookup answers for an execution of an
// instance without n8n's API configured: the service then knows no more
// than with no API at all.
var ErrNoAPI = errors.New("no n8n API is configured for this execution's instance")

// OfInstance qualifies the report's ids with the n8n instance it came from,
// its dedupe key too: two instances' execution 7 are two errors.
func (r *N8NErrorReport) OfInstance(instance string) {
	if instance == "" || instance == DefaultInstance {
		return
	}
	for _, f := range []*string{&r.ExecutionID, &r.RetryOf, &r.WorkflowID, &r.DedupeKey} {
		*f = QualifyID(instance, *f)
	}
}
