package handlers

import (
	"fmt"
	"io"
)

// MaxNesting is how deep a JSON body may nest: objects and arrays inside
// one another, the outermost one at level 1. n8n's deepest payload (an Error
// Trigger item quoting a node's parameters) stays under 20. The limit is
// enforced while the bytes are read, before a decoder sees them, so neither
// the decoders nor anything that walks what they built (the intake's
// pruner, the redactor, the cleaner) can be made to recurse or allocate in
// proportion to the depth.
const MaxNesting = 64

// MaxMembers is how many members the outermost object of a body read whole
// (a claim, an outcome) may have: ten or so are used, the others ignored,
// and each costs a map entry on top of its bytes.
const MaxMembers = 1000

// nestingError is a body that nests deeper than MaxNesting.
type nestingError struct {
	offset int64 // of the bracket one level too deep
}

func (e *nestingError) Error() string {
	return fmt.Sprintf("the JSON nests deeper than %d levels (at byte %d)", MaxNesting, e.offset)
}

// nesting follows the depth of JSON text byte by byte in constant memory:
// brackets count outside strings, a string ends at an unescaped quote.
// Whether the text is valid JSON is the decoder's to judge.
type nesting struct {
	depth   int
	n       int64 // bytes seen
	inStr   bool
	escaped bool // the previous byte in a string was a lone backslash
	err     *nestingError
	commas  int // at depth 1: the outermost value's members or elements, less one
}

// feed follows b. At the first bracket past MaxNesting it returns how many
// bytes of b came before it and the error, and from then on it returns the
// error for anything.
func (s *nesting) feed(b []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	for i, c := range b {
		switch {
		case s.inStr:
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inStr = false
			}
		case c == '"':
			s.inStr = true
		case c == '[' || c == '{':
			if s.depth++; s.depth > MaxNesting {
				s.err = &nestingError{offset: s.n + int64(i)}
				s.n += int64(i)
				return i, s.err
			}
		case c == ']' || c == '}':
			s.depth--
		case c == ',' && s.depth == 1:
			s.commas++
		}
	}
	s.n += int64(len(b))
	return len(b), nil
}

// checkNesting returns a *nestingError when raw nests deeper than
// MaxNesting.
func checkNesting(raw []byte) error {
	var s nesting
	_, err := s.feed(raw)
	return err
}

var errTooWide = fmt.Errorf("the JSON value has more than %d members", MaxMembers)

// checkShape returns a *nestingError when raw nests deeper than MaxNesting,
// and errTooWide when its outermost value has more than MaxMembers members
// or elements.
func checkShape(raw []byte) error {
	var s nesting
	if _, err := s.feed(raw); err != nil {
		return err
	}
	if s.commas >= MaxMembers {
		return errTooWide
	}
	return nil
}

// nestingReader passes a JSON stream on until it nests deeper than
// MaxNesting: the bytes before the bracket that does are passed on (they
// are JSON text so far), then a *nestingError instead of anything more.
type nestingReader struct {
	r io.Reader
	s nesting
}

func (n *nestingReader) Read(p []byte) (int, error) {
	if n.s.err != nil {
		return 0, n.s.err
	}
	k, err := n.r.Read(p)
	ok, nerr := n.s.feed(p[:k])
	if nerr != nil && ok == 0 {
		return 0, nerr
	}
	if nerr != nil {
		return ok, nil
	}
	return k, err
}
