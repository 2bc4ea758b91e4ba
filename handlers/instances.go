package handlers

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

// Instance is an n8n instance besides the default one: the /v1 token its
// workflows send tells the service which instance a call is from.
type Instance struct {
	Name  string
	Token string
	// HookToken is the token of its execution hooks ("" for none).
	HookToken string
}

// ctxInstance is the context key of the instance a /v1 call came from.
const ctxInstance = "retryaudit.instance"

// instanceToken is a token as bearer compares it.
type instanceToken struct {
	name string
	hash [32]byte
}

// instanceTokens lists every configured token with its instance; an empty
// token opens nothing.
func instanceTokens(cfg Config) ([]instanceToken, error) {
	var out []instanceToken
	add := func(name, token string) {
		if token != "" {
			out = append(out, instanceToken{name: name, hash: sha256.Sum256([]byte(token))})
		}
	}
	add(audit.DefaultInstance, cfg.Token)
	seen := map[string]bool{audit.DefaultInstance: true}
	for _, in := range cfg.Instances {
		if !audit.ValidInstance(in.Name) || seen[in.Name] {
			return nil, fmt.Errorf("handlers: instance name %q is invalid or repeated", in.Name)
		}
		if _, ok := cfg.Links.Instances[in.Name]; !ok {
			return nil, fmt.Errorf("handlers: instance %q has no entry in Links.Instances", in.Name)
		}
		seen[in.Name] = true
		add(in.Name, in.Token)
	}
	return out, nil
}

// qualify keeps the ids a call names under the call's instance: execution
// 7 of staging is "7@staging" to the ledger. With several instances, an id
// may not hold the separator itself, or two ids could meet; such a field is
// refused, naming it.
func (h *Handler) qualify(c *gin.Context, o *object, ids map[string]*string) {
	if len(h.cfg.Instances) == 0 {
		return
	}
	instance := c.GetString(ctxInstance)
	for field, id := range ids {
		if strings.Contains(*id, audit.InstanceSep) {
			o.errs.Add(field, "must not contain "+audit.InstanceSep+
				" while several n8n instances are configured (it joins an id to its instance)")
			continue
		}
		*id = audit.QualifyID(instance, *id)
	}
}

// instanceNames lists the n8n instances, default first, when there are
// several; nil otherwise.
func (h *Handler) instanceNames() []string {
	if len(h.cfg.Instances) == 0 {
		return nil
	}
	names := []string{audit.DefaultInstance}
	for _, in := range h.cfg.Instances {
		names = append(names, in.Name)
	}
	return names
}
