package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/n8n"
)

// seedBodies adds small seeds: the outline of the captured n8n payloads
// (their keys and short values: a whole payload of several KiB makes the
// fuzzer spend its time minimizing it), bodies at and past the nesting
// limit, and extra.
func seedBodies(f *testing.F, extra ...string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "payloads", "*.json"))
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(outline(raw))
	}
	for _, e := range append(depthSeeds(), extra...) {
		f.Add([]byte(e))
	}
}

// outline keeps of a JSON document its first levels, with strings cut
// short: the shape of a payload in a few hundred bytes.
func outline(raw []byte) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw[:min(len(raw), 256)]
	}
	var cut func(v any, depth int) any
	cut = func(v any, depth int) any {
		switch t := v.(type) {
		case map[string]any:
			if depth > 3 {
				return map[string]any{}
			}
			for k, val := range t {
				t[k] = cut(val, depth+1)
			}
		case []any:
			if len(t) > 2 {
				t = t[:2]
			}
			for i, val := range t {
				t[i] = cut(val, depth+1)
			}
			return t
		case string:
			return t[:min(len(t), 24)]
		}
		return v
	}
	b, _ := json.Marshal(cut(v, 0))
	return b
}

// depthSeeds are bodies at the nesting limit, one past it, and far past
// it after a valid prefix.
func depthSeeds() []string {
	return []string{
		strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting),
		strings.Repeat("[", MaxNesting+1) + strings.Repeat("]", MaxNesting+1),
		`{"a":` + strings.Repeat(`{"a":`, MaxNesting) + "1" + strings.Repeat("}", MaxNesting+1),
		`{"source":"shop","event_id":"e","x":` + strings.Repeat("[", 200),
		`{"execution":{"id":"1"},"a":` + strings.Repeat(`[{"a":`, 100),
		`{"a":"` + strings.Repeat("[{", 100) + `"}`,
	}
}

// decodeFields reads a body as the claim and outcome handlers do.
func decodeFields(raw []byte, strs, ids, lists []string) (*object, map[string]string, bool) {
	var fields map[string]json.RawMessage
	if err := decodeOne(raw, &fields); err != nil || fields == nil {
		return nil, nil, false
	}
	o := &object{fields: fields, errs: audit.FieldErrors{}}
	got := map[string]string{}
	for _, n := range strs {
		got[n] = o.str(n)
	}
	for _, n := range ids {
		got[n] = o.id(n)
	}
	for _, n := range lists {
		got[n] = strings.Join(o.ids(n), "\x1f")
	}
	return o, got, true
}

// checkNoSilentRewrite fails when a field was accepted although the
// decoder had to replace what was sent (invalid UTF-8, a lone surrogate):
// two different ids would then be one key.
func checkNoSilentRewrite(t *testing.T, o *object, got map[string]string) {
	for name, v := range got {
		if _, refused := o.errs[name]; refused {
			continue
		}
		if !utf8.ValidString(v) {
			t.Fatalf("%s accepted as invalid UTF-8: %q", name, v)
		}
		raw := bytes.ToLower(o.fields[name])
		if strings.ContainsRune(v, utf8.RuneError) && !bytes.Contains(raw, []byte(`\ufffd`)) &&
			!bytes.Contains(raw, []byte("\xef\xbf\xbd")) {
			t.Fatalf("%s accepted after the decoder rewrote it: raw %q, decoded %q", name, o.fields[name], v)
		}
	}
}

// checkDepthRefused fails when a body nested past MaxNesting is not refused
// as such before it is decoded.
func checkDepthRefused(t *testing.T, raw []byte) {
	var fields map[string]json.RawMessage
	err := decodeOne(raw, &fields)
	var deep *nestingError
	if checkNesting(raw) != nil && !errors.As(err, &deep) {
		t.Fatalf("a body past %d levels was not refused for it: %v", MaxNesting, err)
	}
}

// FuzzClaimDecoder: any body, no panic; a claim field is either refused
// or exactly what was sent.
func FuzzClaimDecoder(f *testing.F) {
	seedBodies(f, `{"source":"shop","event_id":"inv-\ud800","execution_id":1}`, "{\"source\":\"s\",\"event_id\":\"a\xff\"}",
		`{"source":"shop","event_id":"a","execution_id":"1","items":["x",2,"\udc00"]}`)
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDepthRefused(t, raw)
		o, got, ok := decodeFields(raw, []string{"source", "event_id", "workflow_name", "node", "fingerprint"},
			[]string{"execution_id", "workflow_id", "retry_of"}, nil)
		if !ok {
			return
		}
		checkNoSilentRewrite(t, o, got)
		items := o.ids("items")
		for i, it := range items {
			if _, refused := o.errs["items"]; refused {
				break
			}
			if _, refused := o.errs["items["+strconv.Itoa(i)+"]"]; !refused && !utf8.ValidString(it) {
				t.Fatalf("item %d accepted as invalid UTF-8", i)
			}
		}
		req := audit.ClaimRequest{Source: got["source"], EventID: got["event_id"], ExecutionID: got["execution_id"],
			WorkflowID: got["workflow_id"], WorkflowName: got["workflow_name"], Node: got["node"], RetryOf: got["retry_of"],
			Items: items, Fingerprint: got["fingerprint"]}
		if len(o.errs) == 0 && req.Validate() == nil && strings.ContainsRune(req.EventID, 0) {
			t.Fatalf("a NUL in an accepted event id: %q", req.EventID)
		}
	})
}

// FuzzOutcomeDecoder: the same for an outcome report.
func FuzzOutcomeDecoder(f *testing.F) {
	seedBodies(f, `{"source":"shop","event_id":"a","outcome":"done","reason":"Bearer x\u0000"}`,
		"{\"source\":\"shop\",\"event_id\":\"a\",\"outcome\":\"do\xffne\"}")
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDepthRefused(t, raw)
		o, got, ok := decodeFields(raw, []string{"source", "event_id", "outcome"},
			[]string{"item", "execution_id", "workflow_id", "crm_ref"}, nil)
		if !ok {
			return
		}
		checkNoSilentRewrite(t, o, got)
		reason := o.text("reason")
		if again := n8n.RedactText(reason); again != reason {
			t.Fatalf("a reason redacted twice changes: %q → %q", reason, again)
		}
	})
}

// FuzzErrorBody: the intake's stream reader and the payload parser on any
// body: no panic; every JSON object is read (with nothing replaced by
// U+FFFD that was not sent as one) and recorded with clean text and a
// bounded payload.
func FuzzErrorBody(f *testing.F) {
	seedBodies(f, `{"execution":{"id":"1","error":{"message":"\u0000"}}}`, `{"trigger":{"error":{}}}`, `[]`, `{"a":`,
		"{\"execution\":{\"id\":\"7\xff\"}}", `{"execution":{"id":"7\ud800\udbff\"}}`)
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := readErrorBody(bytes.NewReader(raw), 1<<20)
		var v map[string]any
		valid := json.Unmarshal(raw, &v) == nil && v != nil
		var deep *nestingError
		if tooDeep := checkNesting(raw) != nil; tooDeep != errors.As(err, &deep) && (valid || !tooDeep) {
			t.Fatalf("nesting past %d levels: %v; the reader said %v", MaxNesting, tooDeep, err)
		}
		if valid && err != nil && deep == nil {
			t.Fatalf("a JSON object refused: %v", err)
		}
		if err != nil {
			return
		}
		lower := bytes.ToLower(raw)
		if !bytes.Contains(lower, []byte(`\ufffd`)) && !bytes.Contains(raw, []byte("\xef\xbf\xbd")) &&
			strings.ContainsRune(fmt.Sprint(b.value), utf8.RuneError) {
			t.Fatalf("the decoder replaced what was sent: %q read as %v", raw, b.value)
		}
		r := n8n.ParseErrorTriggerBody(b.sum, b.value)
		if r.Kind == "" || r.DedupeKey == "" || len(r.Payload) > audit.MaxStoredPayload {
			t.Fatalf("report %+v", r)
		}
		for _, s := range []string{r.ExecutionID, r.RetryOf, r.WorkflowID, r.WorkflowName, r.Mode, r.Node, r.Message, r.URL} {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("unclean text %q", s)
			}
		}
	})
}
