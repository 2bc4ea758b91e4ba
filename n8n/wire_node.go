package n8n

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// The retryaudit node (n8n/node, the npm package n8n-nodes-retryaudit) and
// the orders template built with it, which connect --with-example=node
// imports when the node is installed in that n8n.

//go:embed orders-to-crm-node.json
var ordersNodeJSON []byte

const (
	// NodeCredentialName is the node's credential (type retryaudit API)
	// that connect creates and the node template picks by name.
	NodeCredentialName = "retryaudit API"
	nodeCredentialType = "retryauditApi"
	nodePackage        = "n8n-nodes-retryaudit"
	// shippedNodeType is the node's type as the template has it: the
	// package installed as a community package. Loaded from a folder
	// (N8N_CUSTOM_EXTENSIONS, ~/.n8n/custom) n8n names it customNodeType.
	shippedNodeType = nodePackage + ".retryaudit"
	customNodeType  = "CUSTOM.retryaudit"
	roleNodeExample = "example-node"

	scopeCommunityPackageList = "communityPackage:list"
)

// NodeHowToInstall says how to install the node, for a person.
const NodeHowToInstall = "install it in n8n (Settings → Community nodes → Install → " + nodePackage +
	"; or build it with make node and let n8n load it from a folder named in N8N_CUSTOM_EXTENSIONS: " +
	"docs/n8n.md, The retryaudit node), restart n8n, and run connect again"

// nodeInstalled finds how this n8n knows the retryaudit node: its type as
// a community package, or customNodeType when it was loaded from a
// folder. n8n's public API lists no node types and accepts a workflow with
// any; the node's credential type is known exactly when its package is
// loaded, and the community packages list says how.
func nodeInstalled(ctx context.Context, a *Admin, d Discovery) (string, error) {
	_, err := a.call(ctx, http.MethodGet, "/credentials/schema/"+nodeCredentialType, nil, nil, maxAnswer, nil)
	switch {
	case StatusOf(err) == http.StatusNotFound:
		return "", fmt.Errorf("the retryaudit node (%s) is not installed in this n8n: its credential type %s is unknown "+
			"to n8n's API, so --with-example=node cannot import its template; nothing was changed. To use it, %s. "+
			"--with-example alone imports the template with HTTP Request nodes instead", nodePackage, nodeCredentialType,
			NodeHowToInstall)
	case err != nil:
		return "", err
	}
	if !slices.Contains(d.Scopes, scopeCommunityPackageList) {
		return customNodeType, nil
	}
	var pkgs []struct {
		PackageName    string `json:"packageName"`
		InstalledNodes []struct {
			Type string `json:"type"`
		} `json:"installedNodes"`
	}
	if _, err := a.call(ctx, http.MethodGet, "/community-packages", nil, nil, maxAnswer, &pkgs); err != nil {
		return customNodeType, nil // community packages are off: loaded from a folder
	}
	for _, p := range pkgs {
		if p.PackageName == nodePackage {
			for _, n := range p.InstalledNodes {
				if strings.HasSuffix(n.Type, ".retryaudit") {
					return n.Type, nil
				}
			}
			return shippedNodeType, nil
		}
	}
	return customNodeType, nil
}

// planNodeExample plans the node template's import, once, with the
// node's credential: created, or given the service's URL and token.
func (p *Plan) planNodeExample(wfs []Workflow, creds []Credential) error {
	for _, w := range wfs {
		if readFingerprint(w).Role == roleNodeExample {
			p.Kept = append(p.Kept, fmt.Sprintf("the node example %q (%s) is there already: connect imports it once", said(w.Name), said(w.ID)))
			return nil
		}
	}
	switch {
	case len(creds) > 1:
		return fmt.Errorf("%d credentials are named %q in n8n (%s): the node template picks one by name; delete or rename "+
			"the others, then run connect again", len(creds), NodeCredentialName, credentialIDs(creds))
	case len(creds) == 1 && creds[0].Type != nodeCredentialType:
		return fmt.Errorf("the credential %q (%s) is a %s, not a retryaudit API credential: rename it, then run connect again",
			NodeCredentialName, said(creds[0].ID), said(creds[0].Type))
	case len(creds) == 1:
		p.state.nodeCredentialID = creds[0].ID
		p.add(Change{What: fmt.Sprintf("write retryaudit's address and token into the credential %q (%s), which the node template uses",
			NodeCredentialName, said(creds[0].ID)), Scopes: []string{scopeCredentialUpdate}, apply: (*Plan).updateNodeCredential})
	default:
		p.add(Change{What: fmt.Sprintf("create the retryaudit API credential %q (%s, its token)", NodeCredentialName, p.wiring.ServiceURL),
			Scopes: []string{scopeCredentialCreate}, apply: (*Plan).createNodeCredential})
	}
	var s shipped
	json.Unmarshal(ordersNodeJSON, &s)
	p.add(Change{What: fmt.Sprintf("import the example %q with the retryaudit node (%s), not published: point its CRM "+
		"block (the Create CRM order node) at your CRM, then publish it", s.Name, p.nodeType),
		Scopes: []string{scopeWorkflowCreate}, apply: (*Plan).importNodeExample})
	return nil
}

func (p *Plan) nodeCredentialData() map[string]any {
	return map[string]any{"url": p.wiring.ServiceURL, "token": p.wiring.Token}
}

func (p *Plan) createNodeCredential(ctx context.Context) error {
	c, err := p.admin.CreateCredential(ctx, NodeCredentialName, nodeCredentialType, p.nodeCredentialData())
	p.state.nodeCredentialID = c.ID
	return err
}

func (p *Plan) updateNodeCredential(ctx context.Context) error {
	_, err := p.admin.UpdateCredential(ctx, p.state.nodeCredentialID, p.nodeCredentialData())
	return err
}

func (p *Plan) importNodeExample(ctx context.Context) error {
	var s shipped
	if err := json.Unmarshal(ordersNodeJSON, &s); err != nil {
		return fmt.Errorf("a shipped workflow does not parse: %w", err)
	}
	for _, n := range s.Nodes {
		if n["type"] == shippedNodeType {
			n["type"] = p.nodeType
		}
		if creds, ok := n["credentials"].(map[string]any); ok {
			if c, ok := creds[nodeCredentialType].(map[string]any); ok && c["name"] == NodeCredentialName {
				creds[nodeCredentialType] = map[string]any{"id": p.state.nodeCredentialID, "name": NodeCredentialName}
			}
		}
	}
	settings := maps.Clone(s.Settings)
	settings["errorWorkflow"] = p.state.errorWorkflow.ID
	_, err := p.admin.CreateWorkflow(ctx, WorkflowBody{Name: s.Name, Nodes: s.Nodes, Connections: s.Connections,
		Settings: settings, StaticData: map[string]any{staticKey: fingerprint{Role: roleNodeExample}}})
	return err
}
