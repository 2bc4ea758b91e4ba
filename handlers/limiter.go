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

// forgetFull drops the keys whose bucket is full again: they hold nothing
// a new bucket would not.
func (s *limiterSet) forgetFull(now time.Time) {
	for k, l := range s.keys {
		if l.lim.TokensAt(now) >= float64(s.burst) {
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
