package main

import (
	"strings"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/people"
)

// lookupVar names a variable of a source's CRM lookup:
// RETRYAUDIT_CRM_LOOKUP_<NAME>_<suffix>, NAME the source in upper case.
func lookupVar(source, suffix string) string {
	return "RETRYAUDIT_CRM_LOOKUP_" + people.SourceKey(source) + "_" + suffix
}

// lookups reads RETRYAUDIT_CRM_LOOKUP (the sources that have a lookup,
// separated by commas) and each source's variables; every problem names
// its variable.
func (e *envReader) lookups() []people.LookupConfig {
	const list = "RETRYAUDIT_CRM_LOOKUP"
	var out []people.LookupConfig
	keys := map[string]string{}
	for _, source := range strings.Split(e.str(list, ""), ",") {
		source = strings.TrimSpace(source)
		if source == "" {
			continue
		}
		if audit.ValidateKey(source, "x") != nil {
			e.fail(list, "%q is not a source name", source)
			continue
		}
		if other, dup := keys[people.SourceKey(source)]; dup {
			e.fail(list, "%q and %q share the variables %s: rename one source", other, source, lookupVar(source, "*"))
			continue
		}
		keys[people.SourceKey(source)] = source
		c := people.LookupConfig{Source: source, URL: e.str(lookupVar(source, "URL"), ""),
			Method: e.str(lookupVar(source, "METHOD"), ""), Body: e.str(lookupVar(source, "BODY"), ""),
			Token: e.secret(lookupVar(source, "TOKEN")), TokenHeader: e.str(lookupVar(source, "TOKEN_HEADER"), ""),
			Found: e.str(lookupVar(source, "FOUND"), ""), Ref: e.str(lookupVar(source, "REF"), ""),
			NotFoundStatus: e.integer(lookupVar(source, "NOT_FOUND_STATUS"), 0, 0, 599),
			Timeout:        e.duration(lookupVar(source, "TIMEOUT"), people.DefaultLookupTimeout),
			MaxBody:        e.size(lookupVar(source, "MAX_BODY"), people.DefaultLookupMaxBody)}
		headers, err := people.ParseHeaders(e.str(lookupVar(source, "HEADERS"), ""))
		if err != nil {
			e.fail(lookupVar(source, "HEADERS"), "%v", err)
		}
		c.Headers = headers
		if c.URL == "" {
			e.fail(lookupVar(source, "URL"), "required: the CRM's address for a lookup of %s, e.g. "+
				"https://crm.example.com/api/orders?external_id={event_id}", source)
			continue
		}
		if field, err := c.Check(); err != nil {
			e.fail(lookupVar(source, field), "%v", err) // never the token: Check does not quote it
			continue
		}
		out = append(out, c)
	}
	return out
}
