// Package rulestest gives tests gitleaks' own test corpus for its rules.
package rulestest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lucasjones/reggen"

	"github.com/retryaudit/retryaudit/n8n/rules"
)

// Sample is a text from gitleaks' own test corpus and what the rule found
// in it.
type Sample struct {
	Rule, Text string
	Secrets    []string
}

// Corpus returns gitleaks' test corpus for its rules: every string literal
// of a rule's definition (its true positives, written out by gitleaks'
// maintainers) in which the rule, run as gitleaks runs it, finds a secret;
// and n samples per rule generated from the rule's own expression, as
// gitleaks generates its own (with reggen, seeded). The definitions are read from the module's
// source, which the go command has in its cache.
func Corpus(t testing.TB, all *rules.Set, n int) []Sample {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/zricethezav/gitleaks/v8").Output()
	if err != nil {
		t.Fatalf("go list gitleaks: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "cmd", "generate", "config", "rules")
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(files) < 100 {
		t.Fatalf("%d rule files in %s", len(files), dir)
	}
	byID := map[string]rules.Rule{}
	for _, r := range all.Rules() {
		byID[r.ID] = r
	}
	seed, _ := strconv.ParseInt(os.Getenv("RETRYAUDIT_CORPUS_SEED"), 10, 64)
	var corpus []Sample
	add := func(r rules.Rule, text string) {
		var found []string
		for _, sp := range all.Reference(text) {
			if sp.Rule == r.ID {
				found = append(found, text[sp.Start:sp.End])
			}
		}
		if len(found) > 0 {
			corpus = append(corpus, Sample{Rule: r.ID, Text: text, Secrets: found})
		}
	}
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var id string
			var lits []string
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if kv, ok := n.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "RuleID" {
						if v, ok := kv.Value.(*ast.BasicLit); ok {
							id, _ = strconv.Unquote(v.Value)
						}
					}
				}
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && len(s) >= 8 {
						lits = append(lits, s)
					}
				}
				return true
			})
			r, ok := byID[id]
			if !ok {
				continue
			}
			for _, lit := range lits {
				add(r, lit)
			}
		}
	}
	for _, r := range all.Rules() {
		g, err := reggen.NewGenerator(r.Config().Regex.String())
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		for i := range n {
			// Seeded, so that a run is repeatable; RETRYAUDIT_CORPUS_SEED
			// draws other samples.
			g.SetSeed(seed + int64(crc32.ChecksumIEEE([]byte(r.ID))) + int64(i))
			add(r, g.Generate(1))
		}
	}
	return corpus
}
