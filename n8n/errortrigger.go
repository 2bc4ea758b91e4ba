package n8n

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/retryaudit/retryaudit/audit"
)

// ParseErrorTrigger reads an Error Trigger item as n8n emits it. Every JSON
// object is accepted: what the service does not recognise becomes an
// unknown_shape record, because an error workflow that is refused fails in
// its turn and nobody hears of either. raw is the body as received, v the
// same body decoded (with json.Number for numbers).
func ParseErrorTrigger(raw []byte, v map[string]any) audit.N8NErrorReport {
	return ParseErrorTriggerBody(sha256.Sum256(raw), v)
}

// ParseErrorTriggerBody is ParseErrorTrigger for a body that was read as a
// stream: sum is the SHA-256 of its bytes, v what was kept of it.
func ParseErrorTriggerBody(sum [32]byte, v map[string]any) audit.N8NErrorReport {
	r := audit.N8NErrorReport{}
	if _, cleaned := cleanValue(v); cleaned {
		r.AddNote(audit.NoteCleaned)
	}
	wf, _ := v["workflow"].(map[string]any)
	r.WorkflowID, r.WorkflowName = idString(wf["id"]), str(wf["name"])
	exec, _ := v["execution"].(map[string]any)
	trig, _ := v["trigger"].(map[string]any)
	var errObj map[string]any
	switch {
	case exec != nil && idString(exec["id"]) != "":
		r.Kind = audit.N8NErrorExecution
		r.ExecutionID, r.RetryOf = idString(exec["id"]), idString(exec["retryOf"])
		r.Mode, r.URL, r.Node = str(exec["mode"]), str(exec["url"]), str(exec["lastNodeExecuted"])
		errObj, _ = exec["error"].(map[string]any)
		if r.Mode == "manual" && r.WorkflowName == "Example Workflow" {
			r.Kind = audit.N8NErrorTest
		}
	case trig != nil:
		r.Kind = audit.N8NErrorTrigger
		r.Mode = str(trig["mode"])
		errObj, _ = trig["error"].(map[string]any)
	default:
		r.Kind = audit.N8NErrorUnknown
	}
	if node, ok := errObj["node"].(map[string]any); ok && str(node["name"]) != "" {
		r.Node = str(node["name"])
	}
	r.HTTPCode = idString(errObj["httpCode"])
	// n8n 2.41 drops trigger.error.message when it serialises the item; the
	// error workflow sends it beside the item as "message".
	r.Message = cmp.Or(str(errObj["message"]), str(v["message"]), str(errObj["description"]))
	// n8n's HTTP node says "The service was not able to process your
	// request" and keeps what the server said in the description.
	if desc := str(errObj["description"]); desc != "" && desc != r.Message {
		r.Message += ": " + desc
	}
	if r.Message == "" {
		r.Message = audit.DefaultMessage(r.Kind, slices.Sorted(maps.Keys(v)))
	}
	// n8n quotes the request and the answer in its messages: credentials
	// included. Workflows and nodes are named by people, freely.
	r.Message = audit.Truncate(RedactText(r.Message), audit.MaxMessageLen)
	r.URL = RedactText(r.URL)
	r.WorkflowName, r.Node = RedactText(r.WorkflowName), RedactText(r.Node)
	for _, f := range []*string{&r.ExecutionID, &r.RetryOf, &r.WorkflowID, &r.HTTPCode} {
		*f = audit.Truncate(*f, audit.MaxIDLen)
	}
	for _, f := range []*string{&r.WorkflowName, &r.Mode, &r.Node, &r.URL} {
		*f = audit.Truncate(*f, audit.MaxNameLen)
	}
	r.Payload, r.Truncated = storedPayload(v)
	switch r.Kind {
	case audit.N8NErrorExecution:
		r.DedupeKey = "exec:" + r.ExecutionID
	case audit.N8NErrorTest:
		r.DedupeKey = "test:" + r.ExecutionID
	default:
		r.DedupeKey = audit.BodyDedupeKey(sum)
	}
	return r
}

// storedPayload redacts the payload and caps its size. A capped payload is
// no longer valid JSON; it is kept as text, flagged truncated.
func storedPayload(v map[string]any) (string, bool) {
	b, err := json.MarshalIndent(Redact(v), "", "  ")
	if err != nil {
		return "", false
	}
	if len(b) <= audit.MaxStoredPayload {
		return string(b), false
	}
	cut := audit.MaxStoredPayload
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]), true
}

// str returns v when it is a string; absent, null and anything else are "".
func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}

// idString returns an id sent as a string or as a number.
func idString(v any) string {
	switch t := v.(type) {
	case string:
		return strings.TrimSpace(t)
	case json.Number:
		return t.String()
	case float64:
		return fmt.Sprint(t)
	}
	return ""
}
