package n8n

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Wiring is what retryaudit connect wires into an n8n.
type Wiring struct {
	ServiceURL  string   // retryaudit's address as n8n reaches it
	Token       string   // retryaudit's API token: the credential's value
	WithExample bool     // also import the orders template (unpublished)
	Workflows   []string // ids of workflows whose failures retryaudit hears of
	AllActive   bool     // and every published workflow that has no other error workflow
	// WithNodeExample imports the orders template built with the retryaudit
	// node (unpublished) when the node is installed in that n8n.
	WithNodeExample bool
}

// Change is one change connect makes in n8n.
type Change struct {
	What   string   // for people: what changes and why
	Scopes []string // the API key scopes it needs
	apply  func(*Plan, context.Context) error
}

// Plan is what connect found in n8n and what it would change there. An
// empty Changes means n8n is wired as asked.
type Plan struct {
	Changes []Change
	Kept    []string // what connect leaves as it is, and why

	admin    *Admin
	wiring   Wiring
	state    state
	nodeType string // the retryaudit node's type in this n8n (WithNodeExample)
}

// state is what applying the changes learns and later changes use.
type state struct {
	credentialID        string
	credentialUpdatedAt string
	errorWorkflow       Workflow
	watch               map[string]Workflow // published during this run, by id
	nodeCredentialID    string
}

// fingerprint is what connect keeps in the static data of a workflow it
// imported: the workflow's role, and for the error workflow which
// credential it wrote and a bcrypt hash of the token it wrote there. n8n
// never shows a credential's value, so this is how a second run knows
// that the credential still holds the service's token (the credential's
// updatedAt changes when anyone edits it).
type fingerprint struct {
	Role                string `json:"role"`
	Credential          string `json:"credential,omitempty"`
	CredentialUpdatedAt string `json:"credential_updated_at,omitempty"`
	Token               string `json:"token_bcrypt,omitempty"`
}

func readFingerprint(w Workflow) fingerprint {
	var f fingerprint
	raw, _ := json.Marshal(w.StaticData[staticKey])
	json.Unmarshal(raw, &f)
	return f
}

// tokenCost is bcrypt's cost for the token's hash (this package's tests
// lower it: bcrypt under the race detector takes a second a hash).
var tokenCost = bcrypt.DefaultCost

// tokenHash is a bcrypt hash of the token, slow to guess for anyone who
// can read workflows in n8n. The token is hashed with SHA-256 first
// because bcrypt reads at most 72 bytes.
func tokenHash(token string) (string, error) {
	h, err := bcrypt.GenerateFromPassword(prehash(token), tokenCost)
	return string(h), err
}

func tokenMatches(hash, token string) bool {
	return hash != "" && bcrypt.CompareHashAndPassword([]byte(hash), prehash(token)) == nil
}

func prehash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return []byte(hex.EncodeToString(sum[:]))
}

// The scopes of n8n's API keys that connect's calls need (x-required-scope
// in n8n's openapi.yml).
const (
	scopeCredentialList   = "credential:list"
	scopeCredentialCreate = "credential:create"
	scopeCredentialUpdate = "credential:update"
	scopeWorkflowList     = "workflow:list"
	scopeWorkflowRead     = "workflow:read"
	scopeWorkflowCreate   = "workflow:create"
	scopeWorkflowUpdate   = "workflow:update"
	scopeWorkflowActivate = "workflow:activate"
)

// publishEndpoint is how n8n 2.x publishes; n8n 1.x had only activate.
const publishEndpoint = "POST /api/v1/workflows/{workflowId}/publish"

// ErrUnsupported is returned for an n8n whose public API lacks what
// connect needs.
var ErrUnsupported = errors.New("this n8n's public API lacks what connect needs")

// PlanWiring reads n8n and works out what connect must change there. It
// changes nothing. It refuses, changing nothing, when the URL is not n8n's
// public API, n8n is too old, the key lacks a scope a change needs, or a
// workflow named is not there.
func PlanWiring(ctx context.Context, a *Admin, w Wiring) (*Plan, error) {
	d, err := a.Discover(ctx)
	if err != nil {
		return nil, explainDiscover(a, err)
	}
	if err := needScopes(d, "to read the credentials and workflows", scopeCredentialList, scopeWorkflowList, scopeWorkflowRead); err != nil {
		return nil, err
	}
	if slices.Contains(d.Scopes, scopeWorkflowActivate) && !d.Endpoints[publishEndpoint] {
		return nil, fmt.Errorf("%w: it has no %s (n8n 2.x publishes workflows there; connect was built against n8n 2.41.1)",
			ErrUnsupported, publishEndpoint)
	}
	creds, err := a.Credentials(ctx, CredentialName)
	if err != nil {
		return nil, err
	}
	wfs, err := a.Workflows(ctx)
	if err != nil {
		return nil, err
	}
	// The listing keeps little of each workflow: the error workflow is
	// compared with the shipped one whole.
	if ew, err := findErrorWorkflow(wfs); err == nil && ew != nil {
		full, err := a.Workflow(ctx, ew.ID)
		if err != nil {
			return nil, err
		}
		for i := range wfs {
			if wfs[i].ID == ew.ID {
				wfs[i] = full
			}
		}
	}
	p := &Plan{admin: a, wiring: w, state: state{watch: map[string]Workflow{}}}
	if err := p.plan(creds, wfs); err != nil {
		return nil, err
	}
	if w.WithNodeExample {
		if p.nodeType, err = nodeInstalled(ctx, a, d); err != nil {
			return nil, err
		}
		nodeCreds, err := a.Credentials(ctx, NodeCredentialName)
		if err != nil {
			return nil, err
		}
		if err := p.planNodeExample(wfs, nodeCreds); err != nil {
			return nil, err
		}
	}
	for _, c := range p.Changes {
		if err := needScopes(d, "to "+c.What, c.Scopes...); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// explainDiscover turns the first call's failure into what is wrong.
func explainDiscover(a *Admin, err error) error {
	var e *APIError
	switch {
	case !errors.As(err, &e):
		return err
	case e.HTML:
		return fmt.Errorf("%s is not n8n's public API (it answered with a web page): the URL ends in /api/v1, "+
			"such as http://127.0.0.1:5678/api/v1", a.base)
	case e.Status == 401 || e.Status == 403:
		return fmt.Errorf("n8n at %s refused the API key (%d %s): create one in n8n, Settings → n8n API", a.base, e.Status, e.Message)
	case e.Status == 404:
		return fmt.Errorf("%w: %s has no /discover, which tells an API key's scopes (n8n 2.41.1 has it): "+
			"upgrade n8n, or wire it by hand (docs/n8n.md, By hand)", ErrUnsupported, a.base)
	}
	return err
}

// needScopes refuses when the key lacks any of scopes.
func needScopes(d Discovery, why string, scopes ...string) error {
	var missing []string
	for _, s := range scopes {
		if !slices.Contains(d.Scopes, s) && !slices.Contains(missing, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the n8n API key lacks the scope %s, needed %s: in n8n, Settings → n8n API, "+
		"give a key that scope (and use it here), then run connect again; nothing was changed",
		strings.Join(missing, ", "), why)
}

// plan works out the changes from what n8n holds.
func (p *Plan) plan(creds []Credential, wfs []Workflow) error {
	cred, err := findCredential(creds)
	if err != nil {
		return err
	}
	ew, err := findErrorWorkflow(wfs)
	if err != nil {
		return err
	}
	targets, err := p.targets(wfs, ew)
	if err != nil {
		return err
	}
	fp := fingerprint{}
	if ew != nil {
		fp = readFingerprint(*ew)
		p.state.errorWorkflow = *ew
	}
	if cred != nil {
		p.state.credentialID, p.state.credentialUpdatedAt = cred.ID, cred.UpdatedAt
	}
	credentialCurrent := cred != nil && fp.Credential == cred.ID && fp.CredentialUpdatedAt == cred.UpdatedAt &&
		tokenMatches(fp.Token, p.wiring.Token)
	switch {
	case cred == nil:
		p.add(Change{What: `create the Header Auth credential "retryaudit" (Authorization: Bearer <retryaudit's token>)`,
			Scopes: []string{scopeCredentialCreate}, apply: (*Plan).createCredential})
	case !credentialCurrent:
		p.add(Change{What: fmt.Sprintf(`write retryaudit's token into the credential "retryaudit" (%s): n8n never shows `+
			`a credential's value, and connect did not write this token there`, said(cred.ID)),
			Scopes: []string{scopeCredentialUpdate}, apply: (*Plan).updateCredential})
	}
	if err := p.planErrorWorkflow(ew, !credentialCurrent); err != nil {
		return err
	}
	if p.wiring.WithExample {
		p.planExample(wfs)
	}
	for _, t := range targets {
		p.planTarget(t)
	}
	return nil
}

func (p *Plan) add(c Change) { p.Changes = append(p.Changes, c) }

func findCredential(creds []Credential) (*Credential, error) {
	var found []Credential
	for _, c := range creds {
		if c.Name == CredentialName {
			found = append(found, c)
		}
	}
	switch {
	case len(found) > 1:
		return nil, fmt.Errorf("%d credentials are named %q in n8n (%s): the workflows pick one by name; "+
			"delete or rename the others, then run connect again", len(found), CredentialName, credentialIDs(found))
	case len(found) == 1 && found[0].Type != credentialType:
		return nil, fmt.Errorf("the credential %q (%s) is a %s, not a Header Auth credential: rename it, then run connect again",
			CredentialName, said(found[0].ID), said(found[0].Type))
	case len(found) == 1:
		return &found[0], nil
	}
	return nil, nil
}

func credentialIDs(cs []Credential) string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, said(c.ID))
	}
	return strings.Join(ids, ", ")
}

// targets are the workflows whose error workflow connect sets: those
// named, and with AllActive every published one that has no other error
// workflow (one that has is kept, and said so).
func (p *Plan) targets(wfs []Workflow, ew *Workflow) ([]Workflow, error) {
	byID := map[string]Workflow{}
	for _, w := range wfs {
		byID[w.ID] = w
	}
	var out []Workflow
	for _, id := range p.wiring.Workflows {
		w, ok := byID[id]
		switch {
		case !ok:
			return nil, fmt.Errorf("n8n has no workflow %q that this API key can read (--workflows takes ids, "+
				"the last part of the workflow's address in the editor)", id)
		case ew != nil && id == ew.ID:
			return nil, fmt.Errorf("workflow %s is retryaudit's error workflow itself: leave it out of --workflows", id)
		}
		if !slices.ContainsFunc(out, func(o Workflow) bool { return o.ID == id }) {
			out = append(out, w)
		}
	}
	if !p.wiring.AllActive {
		return out, nil
	}
	for _, w := range wfs {
		if !w.Active || (ew != nil && w.ID == ew.ID) || slices.ContainsFunc(out, func(o Workflow) bool { return o.ID == w.ID }) {
			continue
		}
		if other := errorWorkflowOf(w); other != "" && (ew == nil || other != ew.ID) {
			p.Kept = append(p.Kept, fmt.Sprintf("%q (%s) keeps its own error workflow %s: name it in --workflows to replace it",
				said(w.Name), said(w.ID), said(other)))
			continue
		}
		out = append(out, w)
	}
	return out, nil
}

func errorWorkflowOf(w Workflow) string {
	s, _ := w.Settings["errorWorkflow"].(string)
	return s
}

func (p *Plan) planExample(wfs []Workflow) {
	for _, w := range wfs {
		if readFingerprint(w).Role == roleExample {
			p.Kept = append(p.Kept, fmt.Sprintf("the example %q (%s) is there already: connect imports it once", said(w.Name), said(w.ID)))
			return
		}
	}
	var s shipped
	json.Unmarshal(ordersJSON, &s)
	p.add(Change{What: fmt.Sprintf("import the example %q, calling retryaudit at %s; not published: point its CRM "+
		"block (the Create CRM order node) at your CRM, then publish it", s.Name, p.wiring.ServiceURL),
		Scopes: []string{scopeWorkflowCreate}, apply: (*Plan).importExample})
}

func (p *Plan) planTarget(w Workflow) {
	had := "it had none"
	if other := errorWorkflowOf(w); other != "" {
		if other == p.state.errorWorkflow.ID && p.state.errorWorkflow.ID != "" {
			return
		}
		had = "it had " + said(other)
	}
	scopes := []string{scopeWorkflowUpdate}
	how := "it is not published, and stays so: the setting applies once you publish it"
	if w.Active {
		scopes, how = append(scopes, scopeWorkflowActivate), "n8n publishes it again"
	}
	id := w.ID
	p.add(Change{What: fmt.Sprintf(`set the error workflow of %q (%s) to "retryaudit: report errors" (%s); %s`, said(w.Name), said(w.ID), had, how),
		Scopes: scopes, apply: func(p *Plan, ctx context.Context) error { return p.setErrorWorkflow(ctx, id) }})
}
