package main

import (
	"context"
	"strings"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/n8n"
)

// n8nInstance is an n8n instance besides the default one, from
// RETRYAUDIT_N8N_INSTANCES and RETRYAUDIT_N8N_<NAME>_* variables.
type n8nInstance struct {
	Name      string
	Token     string // the /v1 token its workflows send
	HookToken string // the token its execution hooks send ("" for none)
	EditorURL string
	APIURL    string
	APIKey    string
}

// instanceVar names one of an instance's variables: staging-eu's token is
// RETRYAUDIT_N8N_STAGING_EU_TOKEN.
func instanceVar(name, what string) string {
	return "RETRYAUDIT_N8N_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_" + what
}

// instances reads RETRYAUDIT_N8N_INSTANCES (names separated by commas) and
// each named instance's variables. Every token, API or hook, must differ
// from every other: the token tells the instances, and n8n's word from a
// workflow's, apart.
func (e *envReader) instances(defaultToken, defaultHookToken string) []n8nInstance {
	const list = "RETRYAUDIT_N8N_INSTANCES"
	var out []n8nInstance
	seen := map[string]bool{}
	tokens := map[string]string{}
	if defaultToken != "" {
		tokens[defaultToken] = "RETRYAUDIT_TOKEN"
	}
	distinct := func(name, token string) {
		if other, dup := tokens[token]; token != "" && dup {
			e.fail(name, "is the same as %s: every token must differ (a hook token is n8n's word, an API token a workflow's)", other)
		} else if token != "" {
			tokens[token] = name
		}
	}
	distinct("RETRYAUDIT_HOOK_TOKEN", defaultHookToken)
	for _, name := range strings.Split(e.str(list, ""), ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			continue
		case name == audit.DefaultInstance:
			e.fail(list, "%q is the instance of the single-instance variables (RETRYAUDIT_TOKEN, RETRYAUDIT_N8N_API_URL, …): "+
				"leave it out", name)
			continue
		case !audit.ValidInstance(name):
			e.fail(list, "%q is not an instance name: a lower-case letter, then up to 31 lower-case letters, digits or -", name)
			continue
		case seen[name]:
			e.fail(list, "%q is named twice", name)
			continue
		}
		seen[name] = true
		in := n8nInstance{Name: name, Token: e.token(instanceVar(name, "TOKEN")),
			HookToken: e.token(instanceVar(name, "HOOK_TOKEN")), APIKey: e.secret(instanceVar(name, "API_KEY"))}
		in.EditorURL = e.httpURL(instanceVar(name, "EDITOR_URL"), e.str(instanceVar(name, "EDITOR_URL"), ""))
		in.APIURL = e.httpURL(instanceVar(name, "API_URL"), e.str(instanceVar(name, "API_URL"), ""))
		switch other, dup := tokens[in.Token]; {
		case in.Token == "":
			e.fail(instanceVar(name, "TOKEN"), "required: the token the workflows of instance %s send", name)
		case dup:
			e.fail(instanceVar(name, "TOKEN"), "is the same as %s: the token tells the instances apart", other)
		default:
			tokens[in.Token] = instanceVar(name, "TOKEN")
		}
		distinct(instanceVar(name, "HOOK_TOKEN"), in.HookToken)
		if (in.APIURL == "") != (in.APIKey == "") {
			e.fail(instanceVar(name, "API_URL"), "set both %s and %s, or neither", instanceVar(name, "API_URL"),
				instanceVar(name, "API_KEY"))
		}
		out = append(out, in)
	}
	return out
}

// handlerInstances are the instances' tokens, as the handlers take them.
func (c config) handlerInstances() []handlers.Instance {
	var out []handlers.Instance
	for _, in := range c.Instances {
		out = append(out, handlers.Instance{Name: in.Name, Token: in.Token, HookToken: in.HookToken})
	}
	return out
}

// editorURLs are the instances' editor URLs, by name, for links.
func (c config) editorURLs() map[string]string {
	if len(c.Instances) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, in := range c.Instances {
		m[in.Name] = in.EditorURL
	}
	return m
}

// lookupByInstance asks each instance's n8n API about its own executions,
// by the instance an id is qualified with; an instance without an API
// answers audit.ErrNoAPI.
type lookupByInstance struct {
	clients map[string]*n8n.Client // by instance; nil entries have no API
	links   audit.Links
}

func (l *lookupByInstance) Execution(ctx context.Context, qid string) (audit.N8NExecution, error) {
	instance, id := l.links.Instance(qid)
	c := l.clients[instance]
	if c == nil {
		return audit.N8NExecution{}, audit.ErrNoAPI
	}
	x, err := c.Execution(ctx, id)
	if err != nil {
		return x, err
	}
	x.ID = qid
	x.RetryOf = audit.QualifyID(instance, x.RetryOf)
	x.WorkflowID = audit.QualifyID(instance, x.WorkflowID)
	return x, nil
}

// ExecutionNow asks the execution's instance about it now, past the cache
// (for a retry).
func (l *lookupByInstance) ExecutionNow(ctx context.Context, qid string) (audit.N8NExecution, error) {
	return l.each(ctx, qid, (*n8n.Client).ExecutionNow)
}

// Retry asks the execution's instance to retry it.
func (l *lookupByInstance) Retry(ctx context.Context, qid string) (audit.N8NExecution, error) {
	return l.each(ctx, qid, (*n8n.Client).Retry)
}

// each calls the API of an execution's instance with its own id and
// qualifies the ids n8n answers with.
func (l *lookupByInstance) each(ctx context.Context, qid string,
	call func(*n8n.Client, context.Context, string) (audit.N8NExecution, error)) (audit.N8NExecution, error) {
	instance, id := l.links.Instance(qid)
	c := l.clients[instance]
	if c == nil {
		return audit.N8NExecution{}, audit.ErrNoAPI
	}
	x, err := call(c, ctx, id)
	if err != nil {
		return x, err
	}
	x.ID = audit.QualifyID(instance, x.ID)
	x.RetryOf = audit.QualifyID(instance, x.RetryOf)
	x.WorkflowID = audit.QualifyID(instance, x.WorkflowID)
	return x, nil
}
