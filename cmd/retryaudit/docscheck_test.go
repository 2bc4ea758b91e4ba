package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The checking half of TestDocsAreTrue: one function per kind of name.
// Each says a problem with the page's path in front.

var sprintf = fmt.Sprintf

// varRe finds variables, templates included (RETRYAUDIT_N8N_<NAME>_TOKEN).
var varRe = regexp.MustCompile(`RETRYAUDIT_[A-Z0-9_]*(?:<NAME>[A-Z0-9_]*)?`)

// exampleInstances are the instances configNames names so that loadConfig
// reads their variables: staging stands for <NAME>, eu-2 is an example the
// docs give.
var exampleInstances = map[string]string{"STAGING": "staging", "EU_2": "eu-2"}

// templated writes an instance's variable as the docs' template:
// RETRYAUDIT_N8N_STAGING_TOKEN is RETRYAUDIT_N8N_<NAME>_TOKEN.
func templated(name string) string {
	for upper := range exampleInstances {
		if rest, ok := strings.CutPrefix(name, "RETRYAUDIT_N8N_"+upper+"_"); ok {
			return "RETRYAUDIT_N8N_<NAME>_" + rest
		}
		if rest, ok := strings.CutPrefix(name, "RETRYAUDIT_CRM_LOOKUP_"+upper+"_"); ok { // a source's lookup
			return "RETRYAUDIT_CRM_LOOKUP_<NAME>_" + rest
		}
	}
	return name
}

func (tr *truth) knownVariable(name string) bool {
	name = strings.ReplaceAll(name, "<NAME>", exampleInstance)
	if strings.HasSuffix(name, "_") { // a family: RETRYAUDIT_*, RETRYAUDIT_N8N_*
		for _, set := range []map[string]bool{tr.configReads, tr.hookReads} {
			for k := range set {
				if strings.HasPrefix(k, name) {
					return true
				}
			}
		}
		return false
	}
	return tr.configReads[name] || tr.hookReads[name] || otherVariables[name] != ""
}

func (tr *truth) checkVariables(p docPage, say func(string, ...any)) {
	seen := map[string]bool{}
	for _, name := range varRe.FindAllString(p.text, -1) {
		if !seen[name] && !tr.knownVariable(name) {
			say("%s: neither the configuration, nor n8n/retryaudit-hooks.js, nor a listed exception reads it", name)
		}
		seen[name] = true
	}
}

// checkConfigurationPage holds docs/configuration.md to what loadConfig and
// the hooks file read: a row for every variable, marked (file) exactly
// when NAME_FILE is read too.
func (tr *truth) checkConfigurationPage(pages []docPage) []string {
	const page = "docs/configuration.md"
	i := slices.IndexFunc(pages, func(p docPage) bool { return p.path == page })
	if i < 0 {
		return []string{page + ": missing"}
	}
	var out []string
	say := func(format string, args ...any) { out = append(out, page+": "+sprintf(format, args...)) }
	rows := map[string]bool{} // a variable a row names first → whether a row marks it (file)
	for _, line := range strings.Split(pages[i].text, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`RETRYAUDIT_") {
			continue
		}
		for _, name := range varRe.FindAllString(cells[1], -1) {
			rows[name] = rows[name] || strings.Contains(cells[1], "(file)")
		}
	}
	for name := range tr.configReads {
		if base, ok := strings.CutSuffix(name, "_FILE"); ok && tr.configReads[base] {
			if !rows[templated(base)] {
				say("%s may come from %s_FILE: its row should say (file)", templated(base), templated(base))
			}
			continue
		}
		if _, ok := rows[templated(name)]; !ok {
			say("%s is read by the configuration and has no row", templated(name))
		}
	}
	for name, file := range rows {
		instance := strings.ReplaceAll(name, "<NAME>", exampleInstance)
		if file && !tr.configReads[instance+"_FILE"] && !tr.hookReads[instance+"_FILE"] {
			say("%s says (file), and %s_FILE is read by nothing", name, name)
		}
	}
	for name := range tr.hookReads {
		if _, ok := rows[name]; !ok {
			say("%s is read by n8n/retryaudit-hooks.js and has no row", name)
		}
	}
	return out
}

// docRoute is one route of the engine, by path segment.
type docRoute struct {
	method string
	segs   []string
}

var (
	methodPathRe  = regexp.MustCompile(`^(?:(GET|POST|PUT|PATCH|DELETE) )?(/\S*)$`)
	serviceURLRe  = regexp.MustCompile("(?:https?://(?:127\\.0\\.0\\.1:8080|localhost:8080|retryaudit:8080|retryaudit\\.example\\.com)|BASE_URL)(/[^\\s`'\"<>)|,;]*)")
	placeholderRe = regexp.MustCompile(`\{[^}]*\}|<[^>]*>`)
)

// checkEndpoints finds the service's paths the page names — a code span
// that is a path (with or without its method), an address of the service —
// and looks each up in the route table.
func (tr *truth) checkEndpoints(d docParts, say func(string, ...any)) {
	for _, span := range d.spans {
		m := methodPathRe.FindStringSubmatch(placeholderRe.ReplaceAllString(span, "{}"))
		if m == nil || notService(strings.SplitN(m[2], "?", 2)[0]) {
			continue
		}
		if !tr.hasRoute(m[1], m[2]) {
			say("%s: no such route (handlers.Register)", span)
		}
	}
	for _, text := range append(d.code(), d.prose) {
		for _, m := range serviceURLRe.FindAllStringSubmatch(placeholderRe.ReplaceAllString(text, "{}"), -1) {
			if m[1] != "/" && !tr.hasRoute("", m[1]) {
				say("%s: no such route (handlers.Register)", m[0])
			}
		}
	}
}

func notService(p string) bool {
	if strings.HasPrefix(p, "//") {
		return true // a comment, or user:password@host
	}
	return slices.ContainsFunc(notServicePaths, func(prefix string) bool {
		return p == prefix || strings.HasPrefix(p, prefix+"/")
	})
}

// hasRoute matches a documented path against the routes: {…} stands for
// one segment; a path of one segment, or ending in /, may name a group of
// routes (/v1, /static/).
func (tr *truth) hasRoute(method, p string) bool {
	p, _, _ = strings.Cut(p, "?")
	p = strings.TrimRight(p, ".:")
	segs := strings.Split(strings.Trim(p, "/"), "/")
	group := len(segs) == 1 || (strings.HasSuffix(p, "/") && p != "/")
	return slices.ContainsFunc(tr.routes, func(r docRoute) bool {
		return (method == "" || r.method == method) && matchSegs(segs, r.segs, group)
	})
}

func matchSegs(doc, route []string, group bool) bool {
	for i, r := range route {
		switch {
		case strings.HasPrefix(r, "*"):
			return true
		case i == len(doc):
			return group
		case r == doc[i] || strings.HasPrefix(r, ":") || doc[i] == "{}":
		default:
			return false
		}
	}
	return len(doc) == len(route)
}

var (
	commandRe = regexp.MustCompile(`^[a-z][a-z-]*$`)
	makeRe    = regexp.MustCompile(`(?:^|[\s;&|(])make ([a-z][\w-]*)`)
)

// calls says whether tokens[i] runs retryaudit with arguments: not the
// user's name (useradd … retryaudit), not a flag's value (docker run --name
// retryaudit), not a folder (/var/lib/retryaudit).
func calls(tokens []string, i int) bool {
	tok := tokens[i]
	return (tok == "retryaudit" || strings.HasSuffix(tok, "bin/retryaudit")) && i+1 < len(tokens) &&
		(i == 0 || !strings.HasPrefix(tokens[i-1], "-"))
}

// checkCommands looks up every make target and every retryaudit command and
// flag named in the page's code.
func (tr *truth) checkCommands(d docParts, say func(string, ...any)) {
	for _, line := range d.code() {
		for _, m := range makeRe.FindAllStringSubmatch(line, -1) {
			if !tr.targets[m[1]] {
				say("make %s: no such target in the Makefile", m[1])
			}
		}
		tokens := strings.Fields(line)
		for i := range tokens {
			if !calls(tokens, i) {
				continue
			}
			cmd, args := "", tokens[i+1:]
			if next := args[0]; !strings.HasPrefix(next, "-") {
				if tr.flags[next] == nil {
					if commandRe.MatchString(next) && len(args) > 1 && strings.HasPrefix(args[1], "--") {
						say("retryaudit %s: no such command", next)
					}
					continue
				}
				cmd, args = next, args[1:]
			}
			for _, a := range args {
				if slices.Contains([]string{"|", "&&", "||", ";", ">", "2>&1"}, a) {
					break
				}
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if strings.HasPrefix(a, "-") && !tr.flags[cmd][name] && !(cmd == "" && (name == "help" || name == "h")) {
					say("retryaudit %s %s: no such flag", cmd, a)
				}
			}
		}
	}
}

// checkNames looks up the tests, benchmarks and metrics the page names, and
// the patterns of its go test commands in the packages they run.
func (tr *truth) checkNames(p docPage, d docParts, say func(string, ...any)) {
	seen := map[string]bool{}
	for _, name := range regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*`).FindAllString(p.text, -1) {
		found := false
		for _, funcs := range tr.tests {
			found = found || slices.Contains(funcs, name)
		}
		if !found && !seen[name] {
			say("%s: no such test function", name)
		}
		seen[name] = true
	}
	for _, name := range regexp.MustCompile(`\bretryaudit_[a-z0-9_]+`).FindAllString(p.text, -1) {
		if !seen[name] && !tr.names[name] {
			say("%s: no source defines it", name)
		}
		seen[name] = true
	}
	for _, line := range d.code() {
		_, cmd, ok := strings.Cut(line, "go test ")
		if !ok {
			continue
		}
		var pkgs []string
		patterns := map[string]string{} // flag → pattern
		tokens := strings.Fields(cmd)
		for i, tok := range tokens {
			switch {
			case slices.Contains([]string{"-run", "-bench", "-fuzz"}, tok) && i+1 < len(tokens):
				patterns[tok] = strings.Trim(tokens[i+1], `'"`)
			case strings.HasPrefix(tok, "./") && !strings.Contains(tok, "..."):
				pkgs = append(pkgs, path.Clean(tok))
			}
		}
		for flag, pattern := range patterns {
			top, _, _ := strings.Cut(pattern, "/")
			re, err := regexp.Compile(top)
			if err != nil || top == "^$" || top == "." {
				continue
			}
			prefixes := map[string][]string{"-run": {"Test", "Fuzz"}, "-bench": {"Benchmark"}, "-fuzz": {"Fuzz"}}[flag]
			for _, pkg := range pkgs {
				if !slices.ContainsFunc(tr.tests[pkg], func(f string) bool {
					return re.MatchString(f) && slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(f, pre) })
				}) {
					say("go test %s %s ./%s/: no function there matches", flag, pattern, pkg)
				}
			}
		}
	}
}

var repoPathRe = regexp.MustCompile(`^(?:\./)?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?$`)

// checkPaths looks up every repository path the page's code names; a path
// under what .gitignore keeps out (data/, bin/, deploy/.env) is made at run
// time and not looked up.
func (tr *truth) checkPaths(d docParts, say func(string, ...any)) {
	candidates := slices.Clone(d.spans)
	for _, b := range d.blocks {
		for _, tok := range strings.Fields(b) {
			candidates = append(candidates, strings.Trim(tok, `"'(),:;`))
		}
	}
	for _, c := range candidates {
		if !strings.Contains(c, "/") || strings.Contains(c, "...") || !repoPathRe.MatchString(c) {
			continue
		}
		c = strings.TrimPrefix(c, "./")
		first, _, _ := strings.Cut(c, "/")
		if !tr.topLevel[first] || slices.ContainsFunc(tr.ignored, func(ig string) bool {
			return c == ig || strings.HasPrefix(c, ig+"/")
		}) {
			continue
		}
		if _, err := os.Stat(filepath.Join(repoRoot, c)); err != nil {
			say("%s: no such file or folder in the repository", c)
		}
	}
}

// checkLinks follows every relative link to its page and heading.
func checkLinks(p docPage, d docParts, anchors map[string]map[string]bool, say func(string, ...any)) {
	for _, l := range d.links() {
		if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
			continue
		}
		target, frag, _ := strings.Cut(l, "#")
		file := p.path
		if target != "" {
			file = path.Clean(path.Join(path.Dir(p.path), target))
			if _, err := os.Stat(filepath.Join(repoRoot, file)); err != nil {
				say("link %s: %s does not exist", l, file)
				continue
			}
		}
		if a, ok := anchors[file]; ok && frag != "" && !a[frag] {
			say("link %s: %s has no heading #%s", l, file, frag)
		}
	}
}

// checkFacts holds two statements the docs once got wrong to the code they
// describe: the name of the workflows' credential, and how retention
// deletes (how many entries a pass takes, how often it runs).
func checkFacts(t *testing.T, pages []docPage) []string {
	var out []string
	credential := regexp.MustCompile(`"httpHeaderAuth":\s*\{[^}]*"name":\s*"([^"]+)"`).FindStringSubmatch(readRepoFile(t, "n8n/orders-to-crm.json"))
	batch := regexp.MustCompile(`retentionBatch = (\d+)`).FindStringSubmatch(readRepoFile(t, "audit/store/retention.go"))
	every := regexp.MustCompile(`"retention", (\d+)\s*\*\s*time\.Minute`).FindStringSubmatch(readRepoFile(t, "cmd/retryaudit/app.go"))
	// The node template's credential (type retryauditApi) has its own name.
	nodeCredential := regexp.MustCompile(`"retryauditApi":\s*\{[^}]*"name":\s*"([^"]+)"`).FindStringSubmatch(readRepoFile(t, "n8n/orders-to-crm-node.json"))
	if credential == nil || nodeCredential == nil || batch == nil || every == nil {
		return []string{sprintf("the code moved: credential %q, the node's %q, retentionBatch %q, retention's interval %q",
			credential, nodeCredential, batch, every)}
	}
	for _, p := range pages {
		for _, m := range regexp.MustCompile("(?:credential|named exactly) `([^`]+)`").FindAllStringSubmatch(p.text, -1) {
			if m[1] != credential[1] && m[1] != nodeCredential[1] {
				out = append(out, sprintf("%s: the credential `%s`: the shipped workflows use `%s`", p.path, m[1], credential[1]))
			}
		}
		_, section, ok := strings.Cut(p.text, "\n## Retention\n")
		if !ok {
			continue
		}
		section, _, _ = strings.Cut(section, "\n## ")
		for _, m := range regexp.MustCompile(`up to (\d+)`).FindAllStringSubmatch(section, -1) {
			if m[1] != batch[1] {
				out = append(out, sprintf("%s: retention deletes up to %s per pass (retentionBatch), not %s", p.path, batch[1], m[1]))
			}
		}
		if !strings.Contains(section, "Every "+every[1]+" minutes") {
			out = append(out, sprintf("%s: retention runs every %s minutes (app.go); the section does not say so", p.path, every[1]))
		}
	}
	return out
}

// checkReadme keeps the README short and a way to every page.
func checkReadme(pages []docPage) []string {
	var out []string
	readme := pages[slices.IndexFunc(pages, func(p docPage) bool { return p.path == "README.md" })]
	if n := strings.Count(readme.text, "\n"); n > 300 {
		out = append(out, sprintf("README.md: %d lines; keep it to 300 and move the rest to docs/", n))
	}
	linked := map[string]bool{}
	for _, l := range readme.parts().links() {
		target, _, _ := strings.Cut(l, "#")
		linked[path.Clean(target)] = true
	}
	for _, p := range pages {
		if strings.HasPrefix(p.path, "docs/") && !linked[p.path] {
			out = append(out, p.path+": not linked from README.md")
		}
	}
	return out
}
