package main

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/metrics"
)

// TestDocsAreTrue holds README.md and docs/*.md to the code: every
// RETRYAUDIT_* variable, endpoint, page, make target, command, flag, test
// and repository path they name exists under that name, every variable the
// configuration reads is in docs/configuration.md, and every link between
// the pages leads somewhere. A name the docs give wrongly fails here, not
// in a reader's terminal.
func TestDocsAreTrue(t *testing.T) {
	pages := readDocPages(t)
	tr := loadTruth(t)
	for _, p := range append(tr.problems(pages), checkFacts(t, pages)...) {
		t.Error(p)
	}
	t.Run("the documented exceptions are still read where they say", func(t *testing.T) {
		for name, file := range otherVariables {
			raw, err := os.ReadFile(filepath.Join(repoRoot, file))
			if err != nil || !strings.Contains(string(raw), name) {
				t.Errorf("%s is listed as read by %s, which does not name it (%v)", name, file, err)
			}
		}
	})
}

// TestDocsTruthCanFail feeds the checks one wrong name of each kind beside
// the real pages: each must be reported.
func TestDocsTruthCanFail(t *testing.T) {
	pages := readDocPages(t)
	tr := loadTruth(t)
	for _, c := range []struct{ name, text, want string }{
		{"a variable nothing reads", "Set `RETRYAUDIT_RETENTON=30d`.", "RETRYAUDIT_RETENTON"},
		{"an endpoint not in the route table", "`POST /v1/claim`", "POST /v1/claim"},
		{"a page not in the route table", "See `/reviews`.", "/reviews"},
		{"a service URL not in the route table", "curl http://127.0.0.1:8080/v1/event/x", "/v1/event/x"},
		{"a make target not in the Makefile", "Run `make tests`.", "make tests"},
		{"a file that does not exist", "Edit `deploy/compose.yml`.", "deploy/compose.yml"},
		{"a link to a page that does not exist", "[the API](apis.md)", "apis.md"},
		{"a link to an anchor that does not exist", "[claims](api.md#claims)", "api.md#claims"},
		{"a flag connect does not have", "`retryaudit connect --dryrun`", "--dryrun"},
		{"a command that does not exist", "`retryaudit conect --dry-run`", "conect"},
		{"a test that does not exist", "`TestNoSuchThing` shows it.", "TestNoSuchThing"},
		{"a test pattern no test matches in its package", "`go test -run TestComposeFile ./handlers/`", "TestComposeFile"},
		{"a metric nothing defines", "`retryaudit_claim_total`", "retryaudit_claim_total"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := tr.problems(append(slices.Clone(pages), docPage{path: "docs/broken.md", text: c.text}))
			if !slices.ContainsFunc(got, func(p string) bool {
				return strings.HasPrefix(p, "docs/broken.md") && strings.Contains(p, c.want)
			}) {
				t.Errorf("nothing reported %q in %q; reported: %q", c.want, c.text, got)
			}
		})
	}
	t.Run("a wrong credential name and a wrong retention batch", func(t *testing.T) {
		got := checkFacts(t, append(slices.Clone(pages), docPage{path: "docs/broken.md",
			text: "Pick the credential `retryaudit token`.\n\n## Retention\n\nEvery 10 minutes, up to 500 rows per statement.\n"}))
		for _, want := range []string{"retryaudit token", "not 500"} {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, want) }) {
				t.Errorf("nothing reported %q: %q", want, got)
			}
		}
	})
	t.Run("a variable the configuration reads and docs/configuration.md leaves out", func(t *testing.T) {
		cut := slices.Clone(pages)
		for i, p := range cut {
			if p.path == "docs/configuration.md" {
				cut[i].text = regexp.MustCompile("(?m)^\\| `RETRYAUDIT_QUEUE_WAIT`.*\n").ReplaceAllString(p.text, "")
			}
		}
		got := tr.problems(cut)
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, "RETRYAUDIT_QUEUE_WAIT") }) {
			t.Errorf("a configuration without RETRYAUDIT_QUEUE_WAIT passed: %q", got)
		}
	})
}

// otherVariables are RETRYAUDIT_ names the docs may give that the service's
// configuration does not read, each with the file that reads it. n8n's
// side (the hooks file) is read from that file itself.
var otherVariables = map[string]string{
	"RETRYAUDIT_IMAGE":                 "deploy/compose.yaml", // the compose file's .env: which image to run
	"RETRYAUDIT_TEST_POSTGRES_URL":     "audit/audittest/audittest.go",
	"RETRYAUDIT_TEST_REQUIRE_POSTGRES": "audit/audittest/audittest.go",
	"RETRYAUDIT_TEST_CHROMIUM":         "cmd/retryaudit/browser_test.go",
	"RETRYAUDIT_TEST_REQUIRE_CHROMIUM": "cmd/retryaudit/browser_test.go",
	"RETRYAUDIT_TEST_NODE":             "n8n/hooksjs_test.go",
	"RETRYAUDIT_TEST_REQUIRE_NODE":     "n8n/hooksjs_test.go",
	"RETRYAUDIT_TEST_REQUIRE_CLUSTER":  "cmd/retryaudit/pgcluster_test.go",
	"RETRYAUDIT_TEST_REQUIRE_PODMAN":   "cmd/retryaudit-image/container_test.go",
	"RETRYAUDIT_TEST_IMAGE":            "cmd/retryaudit-image/container_test.go",
	"RETRYAUDIT_TEST_N8N_HOME":         "e2e/n8n_test.go",
	"RETRYAUDIT_TEST_N8N_WIRING":       "e2e/n8n_test.go",
	"RETRYAUDIT_N8N_CACHE":             "e2e/install-n8n",
	"RETRYAUDIT_FUZZTIME":              ".ci/test",
	"RETRYAUDIT_BENCH_EVENTS":          "handlers/bench_test.go",
	"RETRYAUDIT_OVERVIEW_PNG":          "cmd/retryaudit/browser_overview_test.go",
	"RETRYAUDIT_CORPUS_SEED":           "n8n/rules/rulestest/corpus.go",
	"RETRYAUDIT_HOSTILE_N8N_FOR":       "n8n/hostile_test.go",
}

// notServicePaths are the absolute paths the docs give that are not the
// service's routes: the file system of a host or container, and n8n's or
// a CRM's addresses.
var notServicePaths = []string{
	"/run/secrets", "/data", "/etc", "/usr", "/var", "/home", "/backup", "/path", // files
	"/webhook", "/api/v1", "/workflow", // n8n's webhooks, public API and editor
	"/orders", // the example CRM's API
}

// exampleInstance names the instance whose variables stand for the
// templates RETRYAUDIT_N8N_<NAME>_*.
const exampleInstance = "STAGING"

// truth is what the code says exists.
type truth struct {
	configReads map[string]bool // every variable loadConfig reads, an instance named
	hookReads   map[string]bool // what n8n/retryaudit-hooks.js reads from n8n's environment
	routes      []docRoute
	targets     map[string]bool            // the Makefile's
	flags       map[string]map[string]bool // command → its flags
	tests       map[string][]string        // directory → its Test, Benchmark and Fuzz functions
	names       map[string]bool            // every retryaudit_* word of the sources (tests aside): metrics, secrets
	topLevel    map[string]bool            // the repository's first path segments
	ignored     []string                   // paths .gitignore keeps out of the repository
}

func loadTruth(t *testing.T) *truth {
	t.Helper()
	tr := &truth{configReads: configNames(map[string]string{"RETRYAUDIT_N8N_INSTANCES": "staging,eu-2",
		"RETRYAUDIT_CRM_LOOKUP": "staging"}),
		hookReads: map[string]bool{}, targets: map[string]bool{}, flags: map[string]map[string]bool{},
		tests: map[string][]string{}, names: map[string]bool{}, topLevel: map[string]bool{}}

	hooks := readRepoFile(t, "n8n/retryaudit-hooks.js")
	for _, m := range regexp.MustCompile(`env\.(RETRYAUDIT_[A-Z0-9_]+)`).FindAllStringSubmatch(hooks, -1) {
		tr.hookReads[m[1]] = true
	}

	h, err := handlers.New(handlers.Config{Token: "docs-api-token", HookToken: "docs-hook-token",
		ServeMetrics: true, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range h.Engine().Routes() {
		tr.routes = append(tr.routes, docRoute{method: r.Method, segs: strings.Split(strings.Trim(r.Path, "/"), "/")})
	}

	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_-]+):([^=]|$)`).FindAllStringSubmatch(readRepoFile(t, "Makefile"), -1) {
		tr.targets[m[1]] = true
	}

	for _, c := range commands() {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.run(context.Background(), fs, []string{"-h"}, func(string) string { return "" }, io.Discard)
		tr.flags[c.name] = map[string]bool{"help": true, "h": true}
		fs.VisitAll(func(f *flag.Flag) { tr.flags[c.name][f.Name] = true })
	}

	nameRe := regexp.MustCompile(`\bretryaudit_[a-z0-9_]+`)
	funcRe := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)
	err = filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil || (d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules")) {
			return filepath.SkipDir
		}
		switch filepath.Ext(p) {
		case ".go", ".yaml", ".js", ".ts":
		default:
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(p, "_test.go") {
			for _, n := range nameRe.FindAllString(string(raw), -1) {
				tr.names[n] = true
			}
		} else {
			dir, _ := filepath.Rel(repoRoot, filepath.Dir(p))
			for _, m := range funcRe.FindAllStringSubmatch(string(raw), -1) {
				tr.tests[filepath.ToSlash(dir)] = append(tr.tests[filepath.ToSlash(dir)], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		tr.topLevel[e.Name()] = true
	}
	for _, line := range strings.Split(readRepoFile(t, ".gitignore"), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok {
			tr.ignored = append(tr.ignored, strings.TrimSuffix(p, "/"))
		}
	}
	return tr
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// problems returns what the pages name that the code does not have, each
// starting with the page's path.
func (tr *truth) problems(pages []docPage) []string {
	var out []string
	anchors := map[string]map[string]bool{}
	for _, p := range pages {
		anchors[p.path] = p.parts().anchors()
	}
	for _, p := range pages {
		d := p.parts()
		say := func(format string, args ...any) {
			out = append(out, p.path+": "+sprintf(format, args...))
		}
		tr.checkVariables(p, say)
		tr.checkEndpoints(d, say)
		tr.checkCommands(d, say)
		tr.checkNames(p, d, say)
		tr.checkPaths(d, say)
		checkLinks(p, d, anchors, say)
	}
	out = append(out, tr.checkConfigurationPage(pages)...)
	out = append(out, checkReadme(pages)...)
	return out
}
