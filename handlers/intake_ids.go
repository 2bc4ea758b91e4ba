package handlers

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/retryaudit/retryaudit/audit"
)

// payloadIDs are the ids an Error Trigger payload names, by their place in
// it: the service links and deduplicates by them.
var payloadIDs = []struct{ field, object, key string }{
	{"execution.id", "execution", "id"},
	{"execution.retryOf", "execution", "retryOf"},
	{"workflow.id", "workflow", "id"},
}

// writtenOut matches the text visibleText writes for a byte that is not
// UTF-8 (\xff) or a lone surrogate (\ud800). The same text can be typed.
var writtenOut = regexp.MustCompile(`\\x[0-9a-f]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// refusedIDs checks the ids of an error body as they were sent, before the
// parser trims or cleans them: an id is used exactly as sent, or not at all.
// It returns, by field, why an id cannot be used: it breaks a claim's rules
// (control characters, length), has spaces around it, holds the instance
// separator while several n8n instances are configured (from the default
// instance's token, "4711@staging" would be staging's execution), or may be
// text the intake wrote out for bytes that are not UTF-8 (so "coll-\xff"
// typed and "coll-" with the byte 0xff sent raw can never be one id).
func (h *Handler) refusedIDs(v map[string]any, bytesWrittenOut bool) map[string]string {
	refused := map[string]string{}
	for _, p := range payloadIDs {
		obj, _ := v[p.object].(map[string]any)
		var id string
		switch t := obj[p.key].(type) {
		case string:
			id = t
		case json.Number:
			id = t.String()
		default:
			continue
		}
		problem := audit.IDProblem(id)
		switch {
		case problem != "":
		case id != strings.TrimSpace(id):
			problem = "must not have spaces around it"
		case len(h.cfg.Instances) > 0 && strings.Contains(id, audit.InstanceSep):
			problem = "must not contain " + audit.InstanceSep + " while several n8n instances are configured (it joins an id to its instance)"
		case bytesWrittenOut && writtenOut.MatchString(id):
			problem = `must not hold bytes that are not UTF-8 or lone surrogates (written out as \xff, \ud800)`
		}
		if problem != "" {
			refused[p.field] = problem
		}
	}
	return refused
}
