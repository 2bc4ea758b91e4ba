package n8n

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Apply makes the planned changes in order, calling done after each. On a
// failure it stops and says how far it got: a second run plans from what
// n8n holds then, so it finishes the rest and repeats nothing.
func (p *Plan) Apply(ctx context.Context, done func(Change)) error {
	for i, c := range p.Changes {
		if err := c.apply(p, ctx); err != nil {
			return fmt.Errorf("%d of %d changes made, then %q failed: %w (run connect again: it goes on from what n8n holds)",
				i, len(p.Changes), c.What, err)
		}
		if done != nil {
			done(c)
		}
	}
	return nil
}

// credentialData is the Header Auth credential's value: the header the
// service reads its token from.
func (p *Plan) credentialData() map[string]any {
	return map[string]any{"name": "Authorization", "value": "Bearer " + p.wiring.Token}
}

func (p *Plan) createCredential(ctx context.Context) error {
	c, err := p.admin.CreateCredential(ctx, CredentialName, credentialType, p.credentialData())
	if err != nil {
		return err
	}
	return p.reread(ctx, c.ID)
}

func (p *Plan) updateCredential(ctx context.Context) error {
	if _, err := p.admin.UpdateCredential(ctx, p.state.credentialID, p.credentialData()); err != nil {
		return err
	}
	return p.reread(ctx, p.state.credentialID)
}

// reread takes the credential's updatedAt from the list, as the next run
// will read it.
func (p *Plan) reread(ctx context.Context, id string) error {
	creds, err := p.admin.Credentials(ctx, CredentialName)
	if err != nil {
		return err
	}
	for _, c := range creds {
		if c.ID == id {
			p.state.credentialID, p.state.credentialUpdatedAt = c.ID, c.UpdatedAt
			return nil
		}
	}
	return fmt.Errorf("n8n does not list the credential %s it has just written", said(id))
}

// staticData is the error workflow's static data with connect's
// fingerprint of the credential as it is now.
func (p *Plan) staticData(have map[string]any) (map[string]any, error) {
	hash, err := tokenHash(p.wiring.Token)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]any{}
	}
	out[staticKey] = fingerprint{Role: roleErrorWorkflow, Credential: p.state.credentialID,
		CredentialUpdatedAt: p.state.credentialUpdatedAt, Token: hash}
	return out, nil
}

func (p *Plan) importErrorWorkflow(ctx context.Context) error {
	want, err := loadShipped(errorWorkflowJSON, p.wiring.ServiceURL, p.state.credentialID)
	if err != nil {
		return err
	}
	static, err := p.staticData(nil)
	if err != nil {
		return err
	}
	w, err := p.admin.CreateWorkflow(ctx, WorkflowBody{Name: want.Name, Nodes: want.Nodes, Connections: want.Connections,
		Settings: want.Settings, StaticData: static})
	p.state.errorWorkflow = w
	return err
}

func (p *Plan) updateErrorWorkflow(ctx context.Context) error {
	have, err := p.admin.Workflow(ctx, p.state.errorWorkflow.ID)
	if err != nil {
		return err
	}
	want, err := loadShipped(errorWorkflowJSON, p.wiring.ServiceURL, p.state.credentialID)
	if err != nil {
		return err
	}
	static, err := p.staticData(have.StaticData)
	if err != nil {
		return err
	}
	w, err := p.admin.UpdateWorkflow(ctx, have.ID, WorkflowBody{Name: have.Name, Nodes: withPositions(want.Nodes, have.Nodes),
		Connections: want.Connections, Settings: want.Settings, StaticData: static})
	if err != nil {
		return err
	}
	p.state.errorWorkflow = w
	if w.Active {
		p.state.watch[w.ID] = w
	}
	return nil
}

func (p *Plan) publishErrorWorkflow(ctx context.Context) error {
	w, err := p.admin.Publish(ctx, p.state.errorWorkflow.ID)
	if err != nil {
		return err
	}
	p.state.errorWorkflow = w
	p.state.watch[w.ID] = w
	return nil
}

func (p *Plan) importExample(ctx context.Context) error {
	want, err := loadShipped(ordersJSON, p.wiring.ServiceURL, p.state.credentialID)
	if err != nil {
		return err
	}
	settings := maps.Clone(want.Settings)
	settings["errorWorkflow"] = p.state.errorWorkflow.ID
	_, err = p.admin.CreateWorkflow(ctx, WorkflowBody{Name: want.Name, Nodes: want.Nodes, Connections: want.Connections,
		Settings: settings, StaticData: map[string]any{staticKey: fingerprint{Role: roleExample}}})
	return err
}

// setErrorWorkflow sets one workflow's error workflow and nothing else:
// its nodes and connections go back as n8n sent them, and n8n merges the
// one setting into the others.
func (p *Plan) setErrorWorkflow(ctx context.Context, id string) error {
	have, err := p.admin.Workflow(ctx, id)
	if err != nil {
		return err
	}
	w, err := p.admin.UpdateWorkflow(ctx, id, WorkflowBody{Name: have.Name, Nodes: have.Nodes, Connections: have.Connections,
		Settings: map[string]any{"errorWorkflow": p.state.errorWorkflow.ID}})
	if err != nil {
		return err
	}
	if w.Active {
		p.state.watch[w.ID] = w
	}
	return nil
}

// Published names the workflows this run published (n8n finishes that
// in the background: see Watch): those whose webhooks Watch sees answer,
// and those it can only give time.
func (p *Plan) Published() (seen, timed []string) {
	for _, w := range p.state.watch {
		if len(webhookPaths(w)) > 0 {
			seen = append(seen, fmt.Sprintf("%q", said(w.Name)))
		} else {
			timed = append(timed, fmt.Sprintf("%q", said(w.Name)))
		}
	}
	slices.Sort(seen)
	slices.Sort(timed)
	return seen, timed
}

// Watch waits until n8n has finished publishing what this run published.
// n8n completes a publication in the background, and its public API does
// not show when: a webhook is seen registered when it answers a CORS
// preflight; for the rest (the error workflow has no webhook) Watch waits
// settle, several times the 0.3-0.5 s a publication took on a busy
// machine. It gives up after limit, naming the webhook.
func (p *Plan) Watch(ctx context.Context, settle, limit time.Duration) error {
	if len(p.state.watch) == 0 {
		return nil
	}
	deadline := time.Now().Add(limit)
	for _, id := range slices.Sorted(maps.Keys(p.state.watch)) {
		w := p.state.watch[id]
		for _, path := range webhookPaths(w) {
			for {
				ok, err := p.admin.WebhookRegistered(ctx, path)
				if err != nil {
					return err
				}
				if ok {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("n8n has not registered the webhook /webhook/%s of %q (%s) %s after publishing it: "+
						"open the workflow in n8n to see why", said(path), said(w.Name), said(w.ID), limit)
				}
				if err := sleep(ctx, 200*time.Millisecond); err != nil {
					return err
				}
			}
		}
	}
	return sleep(ctx, settle)
}

// webhookPaths are the fixed paths of a workflow's enabled Webhook nodes
// (a path with a :parameter cannot be asked for).
func webhookPaths(w Workflow) []string {
	var paths []string
	for _, n := range w.Nodes {
		p, _ := n["parameters"].(map[string]any)
		path, _ := p["path"].(string)
		if n["type"] == "n8n-nodes-base.webhook" && n["disabled"] != true && path != "" && !strings.Contains(path, ":") {
			paths = append(paths, path)
		}
	}
	return paths
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
