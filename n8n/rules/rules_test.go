package rules_test

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zricethezav/gitleaks/v8/config"

	"github.com/retryaudit/retryaudit/n8n/rules"
	"github.com/retryaudit/retryaudit/n8n/rules/rulestest"
)

// TestFindIsTheReference: on gitleaks' corpus, alone and inside other
// text, Find finds what the rules find run over the whole text.
func TestFindIsTheReference(t *testing.T) {
	set := rules.Default()
	corpus := rulestest.Corpus(t, rules.Default(), 3)
	if len(corpus) < 300 {
		t.Fatalf("a corpus of %d samples", len(corpus))
	}
	ruled := map[string]bool{}
	for _, c := range corpus {
		ruled[c.Rule] = true
		for _, text := range []string{c.Text, "n8n said: " + c.Text + "\nat node X", `{"error":"` + c.Text + `"}`} {
			spans, checked := set.Find(text, time.Now().Add(time.Hour))
			if checked != len(text) {
				t.Fatalf("%s: checked %d of %d", c.Rule, checked, len(text))
			}
			for _, ref := range set.Reference(text) {
				secret := text[ref.Start:ref.End]
				if !slices.ContainsFunc(spans, func(sp rules.Span) bool { return sp.Start <= ref.Start && sp.End >= ref.End }) {
					t.Errorf("%s: Find missed %q (rule %s) in %q", c.Rule, secret, ref.Rule, text)
				}
			}
		}
	}
	t.Logf("%d samples of %d rules (%d rules run)", len(corpus), len(ruled), len(set.Rules()))
}

// TestFindStopsAtItsDeadline: past its deadline Find says how far it
// checked, and every secret before that point is found.
func TestFindStopsAtItsDeadline(t *testing.T) {
	set := rules.Default()
	text := strings.Repeat("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc github ghp_0123456789abcdefABCDEF0123456789abcd ", 200)
	spans, checked := set.Find(text, time.Now().Add(-time.Second))
	if checked >= len(text) || checked == 0 {
		t.Fatalf("checked %d of %d past the deadline", checked, len(text))
	}
	for _, secret := range []string{"sk_live_4eC39HqLyjWDarjtT1zdp7dc", "ghp_0123456789abcdefABCDEF0123456789abcd"} {
		for at := strings.Index(text, secret); at >= 0 && at+len(secret) <= checked; {
			if !slices.ContainsFunc(spans, func(sp rules.Span) bool { return sp.Start <= at && sp.End >= at+len(secret) }) {
				t.Fatalf("%s at %d, before %d, not found", secret, at, checked)
			}
			next := strings.Index(text[at+1:], secret)
			if next < 0 {
				break
			}
			at += 1 + next
		}
	}
}

// TestFindChecksAShortTextWhole: a text that needs less than Find's
// minimum of work is checked whole even past the deadline, so that a busy
// machine redacts it as an idle one does (FuzzRedact found a short text
// cut whole on a loaded machine: redacting it twice gave two answers).
func TestFindChecksAShortTextWhole(t *testing.T) {
	secret := "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	text := "curl -u admin:pw https://crm.example/api github ghp_0123456789abcdefABCDEF0123456789abcd stripe " + secret
	spans, checked := rules.Default().Find(text, time.Now().Add(-time.Second))
	if checked != len(text) {
		t.Fatalf("checked %d of %d bytes", checked, len(text))
	}
	at := strings.Index(text, secret)
	if !slices.ContainsFunc(spans, func(sp rules.Span) bool { return sp.Start <= at && sp.End >= at+len(secret) }) {
		t.Errorf("the Stripe key at %d was not found: %+v", at, spans)
	}
}

// TestGitleaksVersion: GitleaksVersion is the module's version in go.mod.
func TestGitleaksVersion(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build information")
	}
	for _, dep := range info.Deps {
		if dep.Path == "github.com/zricethezav/gitleaks/v8" && dep.Version != rules.GitleaksVersion {
			t.Fatalf("go.mod has gitleaks %s, GitleaksVersion says %s", dep.Version, rules.GitleaksVersion)
		}
	}
}

func TestLoadAll(t *testing.T) {
	all, err := rules.Load(config.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, skipped := len(all.Rules()), len(rules.Default().Rules()); got != skipped+len(rules.Skipped) || got < 200 {
		t.Fatalf("%d rules in all, %d run", got, skipped)
	}
}
