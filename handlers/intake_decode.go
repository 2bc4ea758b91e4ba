package handlers

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"unicode/utf8"
)

// What the intake keeps of an error body it reads as a stream. Bodies up to
// keepBudget are kept whole; past it, the summary n8n puts near the top
// (ids, names, mode, the error's message and node: values up to
// summaryDepth) is kept while an overdraft of summaryBudget lasts, the rest
// is left out, so a body of several MiB costs a bounded amount of memory
// and is still recorded. Every kept value is charged valueCost besides its
// text, so that a million empty strings or arrays cost what they hold in
// memory, not nothing. Depth is no concern here: the body is refused at
// MaxNesting while it is read.
const (
	keepBudget    = 1 << 20
	summaryBudget = 64 << 10
	summaryDepth  = 4 // execution.error.node.name
	maxString     = 16 << 10
	valueCost     = 32 // an interface, a map entry or a slice element, and a header
)

// errorBody is what the intake read of a body.
type errorBody struct {
	value  map[string]any
	sum    [32]byte // SHA-256 of the bytes read
	size   int64    // bytes read
	cut    bool     // the body went on past the hard cap: read up to it
	pruned bool     // values were left out (or cut) to stay within the budget
	// visible: bytes that are not UTF-8, or lone surrogates, were written
	// out as text (\xff, \ud800) rather than replaced
	visible bool
}

// errNotObject is a body whose first value is not a JSON object.
var errNotObject = errors.New("not an object")

// readErrorBody reads one JSON object from r, at most hardCap bytes. A body
// cut at the cap yields what was read before it (cut is set); any other
// malformed body, or one that is not an object, is an error. The size and
// the hash are of the bytes as sent; the strings are decoded after
// visibleText wrote out what the decoder would replace.
func readErrorBody(r io.Reader, hardCap int64) (errorBody, error) {
	cr := &countingReader{r: io.LimitReader(r, hardCap+1), h: sha256.New()}
	vt := newVisibleText(&nestingReader{r: cr})
	dec := json.NewDecoder(vt)
	dec.UseNumber()
	p := &pruner{dec: dec, budget: keepBudget}
	var b errorBody
	tok, err := dec.Token()
	if err != nil {
		return b, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return b, errNotObject
	}
	m, err := p.object(1, true)
	b.value, b.pruned = m, p.pruned
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			err = nil
		} else if err == nil {
			err = errors.New("data after the JSON value")
		}
	}
	b.size, b.visible = cr.n, vt.escaped
	copy(b.sum[:], cr.h.Sum(nil))
	var deep *nestingError
	if err != nil && cr.n > hardCap && !errors.As(err, &deep) {
		b.cut, b.size, err = true, hardCap, nil
	}
	if b.value == nil && err == nil {
		b.value = map[string]any{}
	}
	return b, err
}

// pruner builds the value tree token by token.
type pruner struct {
	dec    *json.Decoder
	budget int
	pruned bool
}

// keepChild decides whether a value at depth is kept, and charges it.
func (p *pruner) keepChild(depth int, parentKept bool) bool {
	switch {
	case !parentKept:
		return false
	case p.budget > 0 || depth <= summaryDepth && p.budget > -summaryBudget:
		p.budget -= valueCost
		return true
	}
	p.pruned = true
	return false
}

// object reads the members of an object whose '{' was read. It returns
// what it built so far with any error, so that a body cut at the cap still
// yields its summary.
func (p *pruner) object(depth int, keep bool) (map[string]any, error) {
	var m map[string]any
	if keep {
		m = map[string]any{}
	}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return m, err
		}
		k, _ := tok.(string)
		kept := p.keepChild(depth, keep)
		v, err := p.value(depth+1, kept)
		if kept && v != nil || kept && err == nil {
			m[k] = v
			p.budget -= len(k)
		}
		if err != nil {
			return m, err
		}
	}
	_, err := p.dec.Token() // '}'
	return m, err
}

func (p *pruner) array(depth int, keep bool) ([]any, error) {
	var a []any
	if keep {
		a = []any{}
	}
	for p.dec.More() {
		kept := p.keepChild(depth, keep)
		v, err := p.value(depth+1, kept)
		if kept && (v != nil || err == nil) {
			a = append(a, v)
		}
		if err != nil {
			return a, err
		}
	}
	_, err := p.dec.Token() // ']'
	return a, err
}

func (p *pruner) value(depth int, keep bool) (any, error) {
	if !keep {
		// Read past it without a token for each of its parts: what is
		// left out costs no allocation.
		var skip skipped
		return nil, p.dec.Decode(&skip)
	}
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			m, err := p.object(depth, keep)
			if m == nil {
				return nil, err
			}
			return m, err
		}
		a, err := p.array(depth, keep)
		if a == nil {
			return nil, err
		}
		return a, err
	case string:
		if !keep {
			return nil, nil
		}
		if len(t) > maxString {
			cut := maxString
			for cut > 0 && !utf8.RuneStart(t[cut]) {
				cut--
			}
			t = t[:cut] + "…"
			p.pruned = true
		}
		p.budget -= len(t)
		return t, nil
	}
	if !keep {
		return nil, nil
	}
	p.budget -= 8
	return tok, nil // json.Number, bool or nil
}

// skipped is a JSON value read past and dropped.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// countingReader counts and hashes what passes through it.
type countingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	return n, err
}
