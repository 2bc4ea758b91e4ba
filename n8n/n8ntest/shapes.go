package n8ntest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// Shape is a credential as it reaches the service in a text: Text holds
// every one of Secrets verbatim, in the context it was seen in (an error
// message, a header line, a connection string, a form body); none may stay
// readable after redaction, and every one of Keep must.
type Shape struct {
	Group   string   `json:"group"`
	Name    string   `json:"name"`
	Text    string   `json:"text"`
	Secrets []string `json:"secrets"`
	Keep    []string `json:"keep"`
}

//go:embed credential-shapes.json
var shapesJSON []byte

// CredentialShapes returns the corpus of credential-shapes.json: its
// shapes, then each class shape after each of n8n's error classes (the
// class name must not shield what follows it). It panics on a corpus that
// does not parse or whose text lacks one of its secrets: the file is the
// test.
func CredentialShapes() []Shape {
	var doc struct {
		Shapes      []Shape  `json:"shapes"`
		Classes     []string `json:"error_classes"`
		ClassShapes []Shape  `json:"class_shapes"`
	}
	if err := json.Unmarshal(shapesJSON, &doc); err != nil {
		panic("n8ntest: credential-shapes.json: " + err.Error())
	}
	out := doc.Shapes
	n := 0
	for _, class := range doc.Classes {
		for _, cs := range doc.ClassShapes {
			n++
			fill := strings.NewReplacer("{class}", class, "{n}", fmt.Sprintf("%03d", n)).Replace
			sh := Shape{Group: "after " + class, Name: class + ": " + cs.Name, Text: fill(cs.Text)}
			for _, s := range cs.Secrets {
				sh.Secrets = append(sh.Secrets, fill(s))
			}
			for _, k := range cs.Keep {
				sh.Keep = append(sh.Keep, fill(k))
			}
			out = append(out, sh)
		}
	}
	for _, sh := range out {
		for _, s := range sh.Secrets {
			if !strings.Contains(sh.Text, s) {
				panic("n8ntest: credential-shapes.json: " + sh.Name + ": its text lacks " + s)
			}
		}
	}
	return out
}

// Readable returns the first of the shape's secrets that out still shows,
// whole or its first half (at least six characters): "" when none.
func (sh Shape) Readable(out string) string {
	for _, s := range sh.Secrets {
		if strings.Contains(out, s) || strings.Contains(out, s[:max(len(s)/2, min(6, len(s)))]) {
			return s
		}
	}
	return ""
}
