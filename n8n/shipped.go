package n8n

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// The workflows users import, shipped in this folder and embedded so that
// retryaudit connect imports the ones its binary was built with.
var (
	//go:embed error-workflow.json
	errorWorkflowJSON []byte
	//go:embed orders-to-crm.json
	ordersJSON []byte
)

// The names and marks the shipped workflows are found again by.
const (
	// CredentialName is the Header Auth credential the shipped workflows
	// pick by name.
	CredentialName = "retryaudit"
	// credentialType is n8n's type of a Header Auth credential.
	credentialType = "httpHeaderAuth"
	// shippedServiceURL is retryaudit's address as the shipped files have
	// it, which connect replaces with the service's.
	shippedServiceURL = "http://127.0.0.1:8080"
	// reportNodeID is the id of the error workflow's "Report to
	// retryaudit" node, which n8n keeps through imports: a workflow holding
	// it beside an Error Trigger is the error workflow imported by hand.
	reportNodeID = "5e7a0000-0000-4000-8000-000000000002"
	// staticKey is connect's key in a workflow's static data, where it
	// marks what it imported and remembers the credential it wrote.
	staticKey = "retryaudit"
)

// Roles of the workflows connect imports, kept under staticKey.
const (
	roleErrorWorkflow = "error-workflow"
	roleExample       = "example"
)

// shipped is one of the shipped workflow files, parsed.
type shipped struct {
	Name        string           `json:"name"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
}

// loadShipped parses a shipped file and points it at the service and the
// credential: every URL that starts with the shipped service address, and
// every Header Auth credential named CredentialName.
func loadShipped(raw []byte, serviceURL, credentialID string) (shipped, error) {
	var s shipped
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("a shipped workflow does not parse: %w", err)
	}
	for _, n := range s.Nodes {
		if p, ok := n["parameters"].(map[string]any); ok {
			if u, ok := p["url"].(string); ok && strings.HasPrefix(u, shippedServiceURL) {
				p["url"] = strings.TrimRight(serviceURL, "/") + strings.TrimPrefix(u, shippedServiceURL)
			}
		}
		if creds, ok := n["credentials"].(map[string]any); ok {
			if c, ok := creds[credentialType].(map[string]any); ok && c["name"] == CredentialName {
				creds[credentialType] = map[string]any{"id": credentialID, "name": CredentialName}
			}
		}
	}
	return s, nil
}

// nodeURL returns the URL of the named node of a workflow, or "".
func nodeURL(nodes []map[string]any, id string) string {
	for _, n := range nodes {
		if n["id"] == id {
			p, _ := n["parameters"].(map[string]any)
			u, _ := p["url"].(string)
			return u
		}
	}
	return ""
}

// nodeCredential returns the Header Auth credential id a node uses, or "".
func nodeCredential(nodes []map[string]any, id string) string {
	for _, n := range nodes {
		if n["id"] == id {
			creds, _ := n["credentials"].(map[string]any)
			c, _ := creds[credentialType].(map[string]any)
			s, _ := c["id"].(string)
			return s
		}
	}
	return ""
}
