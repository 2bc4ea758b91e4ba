package handlers

import (
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is a token bucket: Burst failures at once, then PerSecond.
type Limit struct {
	Burst     int
	PerSecond float64
}

// SignInLimits bound failed sign-ins per client address, per user name and
// for everyone together; zero fields take the defaults. A person who
// mistypes twice is not slowed down; a script trying passwords is answered
// 429 after a few, and strangers with many addresses and names still cost
// at most a few bcrypt comparisons per second (about a sixth of one CPU).
//
// Everyone is two buckets of that size, charged only by failures: one for
// the addresses that failed again and again (strangers), one for the first
// tries of every other address. Strangers using up theirs cannot stop a
// person whose address has not failed: that person's try draws on the
// other bucket, which only first tries that fail can empty.
type SignInLimits struct {
	PerAddress, PerUser, Everyone Limit
}

// DefaultSignInLimits are the limits of a UIConfig that sets none.
var DefaultSignInLimits = SignInLimits{
	PerAddress: Limit{Burst: 5, PerSecond: 1},
	PerUser:    Limit{Burst: 10, PerSecond: 2},
	Everyone:   Limit{Burst: 4, PerSecond: 1},
}

func (l Limit) or(def Limit) Limit {
	if l.Burst <= 0 || l.PerSecond <= 0 {
		return def
	}
	return l
}

const (
	limitWindow = time.Minute // how often a limited key is logged, at most
	maxLimited  = 10000       // keys remembered before the full ones are forgotten
	// strangerAfter failures in a row, each within failMemory of the last,
	// make an address a stranger: a person who mistypes once is not one,
	// and an attacker must wait this long between tries to stop being one.
	strangerAfter = 2
	failMemory    = 15 * time.Minute
)

// The two keys of the bucket for everyone.
const (
	scopeStrangers  = "strangers"
	scopeFirstTries = "first tries"
)

// limiterSet is one token bucket per key (an address, a user name).
type limiterSet struct {
	what  string // "address" or "user", for the log
	burst int
	rate  rate.Limit
	log   *slog.Logger
	mu    sync.Mutex
	keys  map[string]*limited
}

type limited struct {
	lim    *rate.Limiter
	logged time.Time
	// failures counts the key's failed sign-ins since its last success,
	// each within failMemory of the one before; lastFailure is the latest.
	failures    int
	lastFailure time.Time
}

func newLimiterSet(what string, l Limit, log *slog.Logger) *limiterSet {
	return &limiterSet{what: what, burst: l.Burst, rate: rate.Limit(l.PerSecond), log: log, keys: map[string]*limited{}}
}

// reserve takes one attempt for key. It returns the reservation (cancel it
// to give the attempt back) or, when the key has none left, how long to
// wait; the first refusal of a window is logged.
func (s *limiterSet) reserve(key string, now time.Time) (*rate.Reservation, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.keys[key]
	if l == nil {
		if len(s.keys) >= maxLimited {
			s.forgetFull(now)
		}
		l = &limited{lim: rate.NewLimiter(s.rate, s.burst)}
		s.keys[key] = l
	}
	r := l.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		if now.Sub(l.logged) >= limitWindow {
			l.logged = now
			s.log.Warn("failed sign-ins limited", s.what, key, "retry_after", d.Round(time.Second))
		}
		return nil, d
	}
	return r, 0
}

// failed records a failed sign-in of key.
func (s *limiterSet) failed(key string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.keys[key]
	if l == nil {
		return // forgotten in a flood: it starts again as a first try
	}
	if now.Sub(l.lastFailure) >= failMemory {
		l.failures = 0
	}
	l.failures++
	l.lastFailure = now
}

// succeeded clears key's failures: an address someone signed in from is a
// person's.
func (s *limiterSet) succeeded(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.keys[key]; l != nil {
		l.failures = 0
	}
}

// stranger reports whether key failed strangerAfter times in a row lately.
func (s *limiterSet) stranger(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.keys[key]
	return l != nil && l.failures >= strangerAfter && now.Sub(l.lastFailure) < failMemory
}

// forgetFull drops the keys whose bucket is full again and that are no
// strangers: they hold nothing a new bucket would not.
func (s *limiterSet) forgetFull(now time.Time) {
	for k, l := range s.keys {
		if l.lim.TokensAt(now) >= float64(s.burst) && (l.failures < strangerAfter || now.Sub(l.lastFailure) >= failMemory) {
			delete(s.keys, k)
		}
	}
	if len(s.keys) >= maxLimited {
		s.keys = map[string]*limited{} // a flood of addresses: the bcrypt pool still bounds the cost
	}
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
