package handlers_test

import (
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// TestSignInTimeTellsNothing: a wrong password takes as long for a name
// nobody has as for a user, whatever the cost of the user's hash (alice's
// is 7, bob's 10: before, alice's refusals took an eighth of the others').
// The tolerances are ratios measured in one run, the tries interleaved:
// of the CPU time the process spent on each refusal (what the work costs,
// which other processes' load does not change: under 1.25×), and of the
// median time a client waited (under 2×, on shared cores).
func TestSignInTimeTellsNothing(t *testing.T) {
	hash := func(pw string, cost int) []byte {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	s := newServer(t, "sqlite", func(c *handlers.Config, _ *store.Options) {
		c.UI = handlers.UIConfig{Users: map[string][]byte{"alice": hash("alice-pw", 7), "bob": hash("bob-pw", 10)},
			Limits: handlers.SignInLimits{PerAddress: handlers.Limit{Burst: 1000, PerSecond: 1000},
				PerUser: handlers.Limit{Burst: 1000, PerSecond: 1000}, Everyone: handlers.Limit{Burst: 1000, PerSecond: 1000}}}
	})
	names := []string{"alice", "bob", "mallory"}
	took, cpu := map[string][]time.Duration{}, map[string][]time.Duration{}
	for round := range 9 {
		for i := range names {
			name := names[(round+i)%len(names)]
			began, beganCPU := time.Now(), processCPU(t)
			resp, _ := s.page(t, "GET", "/", name+":wrong password", nil)
			took[name] = append(took[name], time.Since(began))
			cpu[name] = append(cpu[name], processCPU(t)-beganCPU)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s with a wrong password: %d", name, resp.StatusCode)
			}
		}
	}
	median := func(by map[string][]time.Duration) map[string]time.Duration {
		m := map[string]time.Duration{}
		for _, name := range names {
			slices.Sort(by[name])
			m[name] = by[name][len(by[name])/2]
		}
		return m
	}
	spread := func(m map[string]time.Duration) float64 {
		all := []time.Duration{m["alice"], m["bob"], m["mallory"]}
		return float64(slices.Max(all)) / float64(slices.Min(all))
	}
	wall, work := median(took), median(cpu)
	t.Logf("median refusal, CPU and wall: alice (cost 7) %v %v, bob (cost 10) %v %v, no such user %v %v; "+
		"slowest/fastest %.2f and %.2f", work["alice"].Round(time.Millisecond), wall["alice"].Round(time.Millisecond),
		work["bob"].Round(time.Millisecond), wall["bob"].Round(time.Millisecond),
		work["mallory"].Round(time.Millisecond), wall["mallory"].Round(time.Millisecond), spread(work), spread(wall))
	if r := spread(work); r > 1.25 {
		t.Errorf("the slowest name's refusal costs %.2f× the CPU of the fastest's, want under 1.25×", r)
	}
	if r := spread(wall); r > 2 {
		t.Errorf("the slowest name's median refusal takes %.2f× the fastest's, want under 2×", r)
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
