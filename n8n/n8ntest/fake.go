// Package n8ntest is a stand-in for the n8n public API that retryaudit
// connect wires through, for tests: credentials, workflows with versions
// and publication, the API key's scopes, and webhooks that answer once
// their workflow is published. It behaves as n8n 2.41.1 was seen to (FACTS
// and its openapi.yml): settings sent are merged into the stored ones, a
// save that changes nodes makes a new version, a saved published workflow
// is published again, a credential referenced by name is resolved on save.
package n8ntest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Key is the API key the fake accepts.
const Key = "n8n-api-key-for-tests"

// AllScopes are the scopes a key made with every box ticked has, as far as
// connect and the service use them.
var AllScopes = []string{"credential:list", "credential:create", "credential:update", "credential:read",
	"workflow:list", "workflow:read", "workflow:create", "workflow:update", "workflow:activate",
	"workflow:deactivate", "execution:list", "execution:read"}

// Fake is the stand-in n8n.
type Fake struct {
	*httptest.Server
	mu         sync.Mutex
	Scopes     []string // the key's scopes
	NoDiscover bool     // an n8n older than /discover
	NoPublish  bool     // an n8n 1.x: no /workflows/{id}/publish
	// WebhookMisses is how many webhook probes answer "not registered"
	// before the published ones answer: n8n publishing in the background.
	WebhookMisses int
	// Node is how the retryaudit node is installed: "" not at all,
	// "folder" (loaded from N8N_CUSTOM_EXTENSIONS), "package" (a
	// community package).
	Node        string
	credentials map[string]*credential
	workflows   map[string]map[string]any
	order       []string // workflow ids in creation order
	seq         int
	clock       time.Time
	mutations   []string
}

type credential struct {
	ID, Name, Type, UpdatedAt string
	Data                      map[string]any
}

// NewFake starts a fake n8n with a key that has every scope.
func NewFake(t *testing.T) *Fake {
	f := &Fake{Scopes: slices.Clone(AllScopes), credentials: map[string]*credential{},
		workflows: map[string]map[string]any{}, clock: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// SetScopes gives the key these scopes (tests call it while other
// goroutines may be asking the fake).
func (f *Fake) SetScopes(scopes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Scopes = scopes
}

// SetNode installs the retryaudit node as Node says.
func (f *Fake) SetNode(how string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Node = how
}

// APIURL is the fake's public API address.
func (f *Fake) APIURL() string { return f.URL + "/api/v1" }

// Mutations are the writes made so far ("POST /credentials", …).
func (f *Fake) Mutations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mutations)
}

// AddWorkflow stores a workflow as a user made it, published or not, and
// returns its id.
func (f *Fake) AddWorkflow(w map[string]any, published bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.create(w)
	if published {
		f.publish(id)
	}
	return id
}

// Workflow returns a stored workflow (a deep copy).
func (f *Fake) Workflow(id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return deepCopy(f.workflows[id])
}

// Workflows returns every stored workflow.
func (f *Fake) Workflows() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, id := range f.order {
		out = append(out, deepCopy(f.workflows[id]))
	}
	return out
}

// Credential returns the data of the credential named name, its id and
// how many credentials have that name.
func (f *Fake) Credential(name string) (data map[string]any, id string, count int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.credentials {
		if c.Name == name {
			data, id, count = maps.Clone(c.Data), c.ID, count+1
		}
	}
	return data, id, count
}

// EditCredential changes a credential as a person does in the editor.
func (f *Fake) EditCredential(id string, data map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.credentials[id]
	c.Data, c.UpdatedAt = data, f.tick()
}

// AddCredential stores a credential as a person made it.
func (f *Fake) AddCredential(name, typ string, data map[string]any) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addCredential(name, typ, data).ID
}

func (f *Fake) tick() string {
	f.clock = f.clock.Add(time.Second)
	return f.clock.Format("2006-01-02T15:04:05.000Z")
}

func (f *Fake) newID() string {
	f.seq++
	return fmt.Sprintf("fake%012d", f.seq)
}

func (f *Fake) addCredential(name, typ string, data map[string]any) *credential {
	c := &credential{ID: f.newID(), Name: name, Type: typ, Data: data, UpdatedAt: f.tick()}
	f.credentials[c.ID] = c
	return c
}

func (f *Fake) create(w map[string]any) string {
	id := f.newID()
	stored := map[string]any{"id": id, "name": w["name"], "active": false, "activeVersionId": nil,
		"versionId": f.newID(), "nodes": w["nodes"], "connections": w["connections"],
		"settings": orEmpty(w["settings"]), "staticData": w["staticData"]}
	f.resolveCredentials(stored)
	f.workflows[id] = deepCopy(stored)
	f.order = append(f.order, id)
	return id
}

func (f *Fake) publish(id string) {
	w := f.workflows[id]
	w["active"], w["activeVersionId"] = true, w["versionId"]
}

// resolveCredentials does what n8n does on save: a node's credential
// without a valid id is looked up by its name.
func (f *Fake) resolveCredentials(w map[string]any) {
	nodes, _ := w["nodes"].([]any)
	for _, n := range nodes {
		creds, _ := n.(map[string]any)["credentials"].(map[string]any)
		for typ, c := range creds {
			ref, _ := c.(map[string]any)
			if id, _ := ref["id"].(string); f.credentials[id] != nil {
				continue
			}
			for _, cr := range f.credentials {
				if cr.Name == ref["name"] && cr.Type == typ {
					creds[typ] = map[string]any{"id": cr.ID, "name": cr.Name}
				}
			}
		}
	}
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodOptions && strings.HasPrefix(r.URL.Path, "/webhook/") {
		f.webhook(w, strings.TrimPrefix(r.URL.Path, "/webhook/"))
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v1")
	if !ok {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!DOCTYPE html><html><head><title>n8n</title></head></html>"))
		return
	}
	if r.Header.Get("X-N8N-API-KEY") != Key {
		answer(w, http.StatusUnauthorized, map[string]any{"message": "unauthorized"})
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	parts := strings.Split(strings.Trim(path, "/"), "/")
	route := r.Method + " " + parts[0]
	if len(parts) > 1 {
		route += "/{id}"
	}
	if len(parts) > 2 {
		route += "/" + parts[2]
	}
	scope := map[string]string{
		"GET credentials": "credential:list", "POST credentials": "credential:create", "PATCH credentials/{id}": "credential:update",
		"GET workflows": "workflow:list", "GET workflows/{id}": "workflow:read", "POST workflows": "workflow:create",
		"PUT workflows/{id}": "workflow:update", "POST workflows/{id}/publish": "workflow:activate",
		"GET executions": "execution:list", "GET executions/{id}": "execution:read",
		"GET community-packages": "communityPackage:list",
	}[route]
	if scope != "" && !slices.Contains(f.Scopes, scope) {
		answer(w, http.StatusForbidden, map[string]any{"message": "Forbidden"})
		return
	}
	if r.Method != http.MethodGet {
		f.mutations = append(f.mutations, route)
	}
	id := ""
	if len(parts) > 1 {
		id = parts[1]
	}
	switch route {
	case "GET discover":
		if f.NoDiscover {
			answer(w, http.StatusNotFound, map[string]any{"message": "not found"})
			return
		}
		f.discover(w)
	case "GET credentials":
		var list []map[string]any
		for _, c := range f.credentials {
			list = append(list, map[string]any{"id": c.ID, "name": c.Name, "type": c.Type, "updatedAt": c.UpdatedAt})
		}
		slices.SortFunc(list, func(a, b map[string]any) int { return strings.Compare(a["id"].(string), b["id"].(string)) })
		answer(w, http.StatusOK, map[string]any{"data": list, "nextCursor": nil})
	case "POST credentials":
		data, _ := body["data"].(map[string]any)
		c := f.addCredential(body["name"].(string), body["type"].(string), data)
		answer(w, http.StatusOK, map[string]any{"id": c.ID, "name": c.Name, "type": c.Type, "updatedAt": c.UpdatedAt})
	case "PATCH credentials/{id}":
		c := f.credentials[id]
		if c == nil {
			answer(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		c.Data, c.UpdatedAt = body["data"].(map[string]any), f.tick()
		answer(w, http.StatusOK, map[string]any{"id": c.ID, "name": c.Name, "type": c.Type, "updatedAt": c.UpdatedAt})
	case "GET workflows":
		f.list(w, r)
	case "GET workflows/{id}":
		f.answerWorkflow(w, id)
	case "POST workflows":
		f.answerWorkflow(w, f.create(body))
	case "PUT workflows/{id}":
		f.update(w, id, body)
	case "POST workflows/{id}/publish":
		if f.NoPublish || f.workflows[id] == nil {
			answer(w, http.StatusNotFound, map[string]any{"message": "not found"})
			return
		}
		f.publish(id)
		f.answerWorkflow(w, id)
	case "GET executions":
		answer(w, http.StatusOK, map[string]any{"data": []any{}, "nextCursor": nil})
	case "GET credentials/{id}/retryauditApi": // the credential type's schema: known when the node is loaded
		if id != "schema" || f.Node == "" {
			answer(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		answer(w, http.StatusOK, map[string]any{"type": "object", "required": []string{"url", "token"}})
	case "GET community-packages":
		list := []any{}
		if f.Node == "package" {
			list = append(list, map[string]any{"packageName": "n8n-nodes-retryaudit", "installedVersion": "0.1.0",
				"installedNodes": []any{map[string]any{"name": "retryaudit", "type": "n8n-nodes-retryaudit.retryaudit"}}})
		}
		answer(w, http.StatusOK, list)
	default:
		answer(w, http.StatusNotFound, map[string]any{"message": "not found"})
	}
}

func (f *Fake) discover(w http.ResponseWriter) {
	var endpoints []map[string]any
	for route, scope := range map[string]string{
		"GET /api/v1/credentials": "credential:list", "POST /api/v1/credentials": "credential:create",
		"GET /api/v1/workflows": "workflow:list", "POST /api/v1/workflows/{workflowId}/publish": "workflow:activate",
	} {
		if slices.Contains(f.Scopes, scope) && !(f.NoPublish && strings.HasSuffix(route, "/publish")) {
			method, path, _ := strings.Cut(route, " ")
			endpoints = append(endpoints, map[string]any{"method": method, "path": path})
		}
	}
	answer(w, http.StatusOK, map[string]any{"data": map[string]any{"scopes": f.Scopes,
		"resources": map[string]any{"all": map[string]any{"endpoints": endpoints}}}})
}

// list answers one page of two workflows, so that clients must follow the
// cursor.
func (f *Fake) list(w http.ResponseWriter, r *http.Request) {
	start := 0
	fmt.Sscan(r.URL.Query().Get("cursor"), &start)
	end := min(start+2, len(f.order))
	var page []map[string]any
	for _, id := range f.order[start:end] {
		page = append(page, f.workflows[id])
	}
	var next any
	if end < len(f.order) {
		next = fmt.Sprint(end)
	}
	answer(w, http.StatusOK, map[string]any{"data": page, "nextCursor": next})
}

func (f *Fake) answerWorkflow(w http.ResponseWriter, id string) {
	wf := f.workflows[id]
	if wf == nil {
		answer(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	answer(w, http.StatusOK, wf)
}

// update saves a workflow as n8n 2.41.1 does: settings merged, a new
// version when nodes or connections changed, published again when it was
// published.
func (f *Fake) update(w http.ResponseWriter, id string, body map[string]any) {
	stored := f.workflows[id]
	if stored == nil {
		answer(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	for _, k := range []string{"name", "nodes", "connections", "settings"} {
		if body[k] == nil {
			answer(w, http.StatusBadRequest, map[string]any{"message": "request/body must have required property '" + k + "'"})
			return
		}
	}
	next := deepCopy(stored)
	next["name"], next["nodes"], next["connections"] = body["name"], body["nodes"], body["connections"]
	f.resolveCredentials(next)
	settings := orEmpty(stored["settings"]).(map[string]any)
	maps.Copy(settings, body["settings"].(map[string]any))
	next["settings"] = settings
	if body["staticData"] != nil {
		next["staticData"] = body["staticData"]
	}
	if !reflect.DeepEqual(next["nodes"], stored["nodes"]) || !reflect.DeepEqual(next["connections"], stored["connections"]) {
		next["versionId"] = f.newID()
	}
	f.workflows[id] = deepCopy(next)
	if stored["active"] == true {
		f.publish(id)
	}
	answer(w, http.StatusOK, f.workflows[id])
}

// webhook answers a CORS preflight: 204 for a path a published workflow
// listens on, as n8n does once publishing finished.
func (f *Fake) webhook(w http.ResponseWriter, path string) {
	if f.WebhookMisses > 0 {
		f.WebhookMisses--
		answer(w, http.StatusInternalServerError, map[string]any{"message": "The requested webhook is not registered."})
		return
	}
	for _, wf := range f.workflows {
		if wf["active"] != true {
			continue
		}
		nodes, _ := wf["nodes"].([]any)
		for _, n := range nodes {
			node := n.(map[string]any)
			p, _ := node["parameters"].(map[string]any)
			if node["type"] == "n8n-nodes-base.webhook" && p["path"] == path {
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
	}
	answer(w, http.StatusInternalServerError, map[string]any{"message": "The requested webhook is not registered."})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func orEmpty(v any) any {
	if m, ok := v.(map[string]any); ok && m != nil {
		return deepCopy(m)
	}
	return map[string]any{}
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	raw, _ := json.Marshal(m)
	var out map[string]any
	json.Unmarshal(raw, &out)
	return out
}
