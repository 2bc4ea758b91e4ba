package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/n8n"
)

// readBody reads the request body up to the configured limit. Over it, it
// answers 413 itself and returns false.
func (h *Handler) readBody(c *gin.Context) ([]byte, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, h.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		h.apiError(c, http.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("the body is larger than %d bytes (RETRYAUDIT_MAX_BODY)", h.cfg.MaxBody), nil)
		return nil, false
	case err != nil:
		h.apiError(c, http.StatusBadRequest, "invalid_body", "the body could not be read", nil)
		return nil, false
	}
	return raw, true
}

// readObject reads the body as exactly one JSON object. On bad JSON it
// answers 400 itself and returns false.
func (h *Handler) readObject(c *gin.Context) (*object, bool) {
	raw, ok := h.readBody(c)
	if !ok {
		return nil, false
	}
	var fields map[string]json.RawMessage
	if err := decodeOne(raw, &fields); err != nil || fields == nil {
		h.apiError(c, http.StatusBadRequest, "invalid_json", "the body must be one JSON object: "+jsonProblem(err), nil)
		return nil, false
	}
	return &object{fields: fields, errs: audit.FieldErrors{}}, true
}

// decodeOne decodes exactly one JSON value: trailing data is an error, and
// so is a value nested deeper than MaxNesting or an object of more than
// MaxMembers members, both found before anything is decoded. Every JSON
// body an endpoint reads whole passes here.
func decodeOne(raw []byte, v any) error {
	if err := checkShape(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var deep *nestingError
	switch {
	case err == nil:
		return "null is not an object"
	case errors.As(err, &deep), errors.Is(err, errTooWide):
		return err.Error()
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typ):
		return "a JSON " + typ.Value + " is not an object"
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	}
	return err.Error()
}

// object reads the fields of a JSON object one by one, so that every field
// with the wrong type is named, not only the first. Unknown fields are
// ignored; absent and null fields read as empty.
type object struct {
	fields map[string]json.RawMessage
	errs   audit.FieldErrors
}

func (o *object) present(name string) (json.RawMessage, bool) {
	raw, ok := o.fields[name]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// str reads a string field.
func (o *object) str(name string) string {
	raw, ok := o.present(name)
	if !ok {
		return ""
	}
	if problem := rawTextProblem(raw); problem != "" {
		o.errs.Add(name, problem)
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		o.errs.Add(name, "must be a string")
	}
	return s
}

// text reads a free-text string field that n8n fills from what failed (an
// outcome's reason): credentials in it are redacted before anything keeps
// it.
func (o *object) text(name string) string {
	return n8n.RedactText(o.str(name))
}

// id reads an id sent as a string or as a JSON integer (n8n sends both).
func (o *object) id(name string) string {
	raw, ok := o.present(name)
	if !ok {
		return ""
	}
	if problem := rawTextProblem(raw); problem != "" {
		o.errs.Add(name, problem)
		return ""
	}
	s, err := idValue(raw)
	if err != nil {
		o.errs.Add(name, "must be a string or an integer")
	}
	return s
}

func idValue(raw json.RawMessage) (string, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10), nil
}

// ids reads an array of ids (strings or integers). It reads one past
// audit.MaxItems at most: a longer list is refused as the domain refuses it,
// before it costs memory in proportion to its length.
func (o *object) ids(name string) []string {
	raw, ok := o.present(name)
	if !ok {
		return nil
	}
	elems, err := arrayElems(raw, audit.MaxItems)
	switch {
	case errors.Is(err, errTooMany):
		o.errs.Add(name, fmt.Sprintf("must hold at most %d items", audit.MaxItems))
		return nil
	case err != nil:
		o.errs.Add(name, "must be an array of strings")
		return nil
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		if problem := rawTextProblem(e); problem != "" {
			o.errs.Add(fmt.Sprintf("%s[%d]", name, i), problem)
			out = append(out, "")
			continue
		}
		s, err := idValue(e)
		if err != nil {
			o.errs.Add(fmt.Sprintf("%s[%d]", name, i), "must be a string")
		}
		out = append(out, s)
	}
	return out
}

var errTooMany = errors.New("too many elements")

// arrayElems returns the elements of a JSON array, at most most of them.
func arrayElems(raw json.RawMessage, most int) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, errors.New("not an array")
	}
	var elems []json.RawMessage
	for dec.More() {
		if len(elems) == most {
			return nil, errTooMany
		}
		var e json.RawMessage
		if err := dec.Decode(&e); err != nil {
			return nil, err
		}
		elems = append(elems, e)
	}
	return elems, nil
}
