package n8n

import (
	"encoding/json"
)

// errorTriggerType is the node type of n8n's Error Trigger.
const errorTriggerType = "n8n-nodes-base.errorTrigger"

// listedWorkflow is a workflow of n8n's listing as connect keeps it: what
// planning reads of every workflow (its id, name, publication, error
// workflow setting and connect's mark, and of its nodes only those that
// tell the error workflow imported by hand), each text cut at a length no
// n8n's reaches. A listing holds every node of every workflow; kept whole,
// an n8n with thousands of workflows (or one that lists without end) would
// hold connect's memory. The error workflow is read again whole.
type listedWorkflow struct{ Workflow }

// maxName bounds a listed name: n8n's are at most 128 characters.
const maxName = 512

// UnmarshalJSON keeps what planning reads of a listed workflow.
func (l *listedWorkflow) UnmarshalJSON(b []byte) error {
	var w struct {
		ID              string `json:"id"`
		Name            string `json:"name"`
		Active          bool   `json:"active"`
		VersionID       string `json:"versionId"`
		ActiveVersionID string `json:"activeVersionId"`
		Nodes           []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"nodes"`
		Settings struct {
			ErrorWorkflow any `json:"errorWorkflow"`
		} `json:"settings"`
		StaticData struct {
			Mark json.RawMessage `json:"retryaudit"` // staticKey
		} `json:"staticData"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	l.Workflow = Workflow{ID: clip(w.ID), Name: clipTo(w.Name, maxName), Active: w.Active, VersionID: clip(w.VersionID),
		ActiveVersionID: clip(w.ActiveVersionID), Settings: map[string]any{}}
	var report, trigger bool
	for _, n := range w.Nodes {
		switch {
		case n.ID == reportNodeID && !report:
			report = true
			l.Nodes = append(l.Nodes, map[string]any{"id": n.ID, "type": clip(n.Type)})
		case n.Type == errorTriggerType && !trigger:
			trigger = true
			l.Nodes = append(l.Nodes, map[string]any{"id": clip(n.ID), "type": n.Type})
		}
	}
	if s, ok := w.Settings.ErrorWorkflow.(string); ok {
		l.Settings["errorWorkflow"] = clip(s)
	}
	var f fingerprint
	if len(w.StaticData.Mark) > 0 && json.Unmarshal(w.StaticData.Mark, &f) == nil {
		f = fingerprint{Role: clip(f.Role), Credential: clip(f.Credential), CredentialUpdatedAt: clip(f.CredentialUpdatedAt),
			Token: clip(f.Token)}
		l.StaticData = map[string]any{staticKey: f}
	}
	return nil
}
