package n8n

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// The error workflow: found again, compared with the shipped one, planned.

// findErrorWorkflow finds the error workflow connect imported (marked in
// its static data), or else one imported by hand from
// n8n/error-workflow.json (its report node beside an Error Trigger).
func findErrorWorkflow(wfs []Workflow) (*Workflow, error) {
	var marked, byHand []Workflow
	for _, w := range wfs {
		switch {
		case readFingerprint(w).Role == roleErrorWorkflow:
			marked = append(marked, w)
		case hasNode(w, reportNodeID) && hasNodeType(w, errorTriggerType):
			byHand = append(byHand, w)
		}
	}
	found := marked
	if len(found) == 0 {
		found = byHand
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	return nil, fmt.Errorf("%d workflows are retryaudit's error workflow (%s): delete all but one, then run connect again",
		len(found), workflowNames(found))
}

func hasNode(w Workflow, id string) bool {
	return slices.ContainsFunc(w.Nodes, func(n map[string]any) bool { return n["id"] == id })
}

func hasNodeType(w Workflow, typ string) bool {
	return slices.ContainsFunc(w.Nodes, func(n map[string]any) bool { return n["type"] == typ })
}

func workflowNames(ws []Workflow) string {
	var s []string
	for _, w := range ws {
		s = append(s, fmt.Sprintf("%q %s", said(w.Name), said(w.ID)))
	}
	return strings.Join(s, ", ")
}

// planErrorWorkflow plans importing, updating and publishing the error
// workflow. remember says the credential changes, so the fingerprint must
// be written again.
func (p *Plan) planErrorWorkflow(ew *Workflow, remember bool) error {
	want, err := loadShipped(errorWorkflowJSON, p.wiring.ServiceURL, p.state.credentialID)
	if err != nil {
		return err
	}
	target := nodeURL(want.Nodes, reportNodeID)
	if ew == nil {
		p.add(Change{What: fmt.Sprintf("import the error workflow %q, reporting to %s", want.Name, target),
			Scopes: []string{scopeWorkflowCreate}, apply: (*Plan).importErrorWorkflow})
		p.add(Change{What: fmt.Sprintf("publish %q (n8n fires only a published error workflow)", want.Name),
			Scopes: []string{scopeWorkflowActivate}, apply: (*Plan).publishErrorWorkflow})
		return nil
	}
	why := workflowDiffs(*ew, want)
	if readFingerprint(*ew).Role != roleErrorWorkflow {
		why = append(why, "connect marks it as retryaudit's error workflow in its static data")
	} else if remember {
		why = append(why, "it remembers which token connect wrote into the credential")
	}
	if len(why) > 0 {
		scopes := []string{scopeWorkflowUpdate}
		how := ""
		if ew.Active {
			scopes, how = append(scopes, scopeWorkflowActivate), "; n8n publishes the update"
		}
		p.add(Change{What: fmt.Sprintf("update the error workflow %q (%s): %s%s", said(ew.Name), said(ew.ID), strings.Join(why, "; "), how),
			Scopes: scopes, apply: (*Plan).updateErrorWorkflow})
	}
	if !ew.Active || (len(why) == 0 && !ew.Published()) {
		p.add(Change{What: fmt.Sprintf("publish %q (%s) (n8n fires only a published error workflow)", said(ew.Name), said(ew.ID)),
			Scopes: []string{scopeWorkflowActivate}, apply: (*Plan).publishErrorWorkflow})
	}
	return nil
}

// workflowDiffs says how a stored error workflow differs from the shipped
// one pointed at the service: what connect would change.
func workflowDiffs(have Workflow, want shipped) []string {
	var why []string
	if h, w := nodeURL(have.Nodes, reportNodeID), nodeURL(want.Nodes, reportNodeID); h != w {
		why = append(why, fmt.Sprintf("it reports to %s, not %s", said(cmpOr(h, "nowhere")), w))
	}
	if h, w := nodeCredential(have.Nodes, reportNodeID), nodeCredential(want.Nodes, reportNodeID); h != w || w == "" {
		why = append(why, `its report node does not use the credential "retryaudit" connect wires`)
	}
	if len(why) == 0 && (!sameNodes(have.Nodes, want.Nodes) || !reflect.DeepEqual(have.Connections, want.Connections)) {
		why = append(why, "its nodes differ from n8n/error-workflow.json")
	}
	keys := make([]string, 0, len(want.Settings))
	for k := range want.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !reflect.DeepEqual(have.Settings[k], want.Settings[k]) {
			why = append(why, fmt.Sprintf("its setting %s is %s, not %v", k, said(fmt.Sprint(have.Settings[k])), want.Settings[k]))
		}
	}
	return why
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// sameNodes reports whether the stored nodes are the wanted ones: the same
// ids, each with the wanted fields (where a node sits on the canvas is the
// user's), none disabled.
func sameNodes(have, want []map[string]any) bool {
	if len(have) != len(want) {
		return false
	}
	byID := map[any]map[string]any{}
	for _, n := range have {
		byID[n["id"]] = n
	}
	for _, w := range want {
		h, ok := byID[w["id"]]
		if !ok || h["disabled"] == true {
			return false
		}
		for k, v := range w {
			if k != "position" && !reflect.DeepEqual(h[k], v) {
				return false
			}
		}
	}
	return true
}

// withPositions keeps the stored nodes' places on the canvas.
func withPositions(want, have []map[string]any) []map[string]any {
	for _, w := range want {
		for _, h := range have {
			if h["id"] == w["id"] && h["position"] != nil {
				w["position"] = h["position"]
			}
		}
	}
	return want
}
