package handlers

import (
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// GuessLimit bounds the wrong tokens one client address may send to /v1
// and to the hooks' endpoint: past Wrong within Window (counted from its
// first wrong token), every request from the address that carries a token
// is answered 429 with Retry-After until the window ends — a right token
// too, or the answers would tell a guess that hit from one that missed.
// Only wrong tokens count: a client with the right one is never slowed
// down, however fast it calls.
type GuessLimit struct {
	Wrong  int
	Window time.Duration
}

// DefaultGuessLimit is the limit of a Config that sets none: 20 wrong
// tokens a minute per address. n8n with a wrong token configured meets it
// within seconds and is told why.
var DefaultGuessLimit = GuessLimit{Wrong: 20, Window: time.Minute}

// maxGuessers is how many addresses the limit remembers; past it, the
// addresses it does not know share one window.
const maxGuessers = 10000

// sharedGuesser is the key of the addresses that share a window.
const sharedGuesser = "(addresses beyond the limit's memory)"

// logQuiet marks a request the guard logged for, in its own summary:
// observe then writes no line for it, so that a flood of guesses costs a
// few lines a minute, not one each.
const logQuiet = "retryaudit.quiet"

// tokenGuard counts wrong tokens per client address.
type tokenGuard struct {
	limit   GuessLimit
	proxies []netip.Prefix
	log     *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	addrs   map[string]*guesser
}

// guesser is one address's window, and what was not logged yet.
type guesser struct {
	start   time.Time // the window's first wrong token
	wrong   int       // wrong tokens in the window
	logged  time.Time // the address's last log line
	unWrong int       // wrong tokens since then
	unShut  int       // 429s since then
}

func newTokenGuard(l GuessLimit, proxies []netip.Prefix, log *slog.Logger, now func() time.Time) *tokenGuard {
	if l.Wrong <= 0 || l.Window <= 0 {
		l = DefaultGuessLimit
	}
	return &tokenGuard{limit: l, proxies: proxies, log: log, now: now, addrs: map[string]*guesser{}}
}

// key is the address a request's guesses count against: the client's
// (through trusted proxies), IPv6 by its /64, which one host holds whole.
func (g *tokenGuard) key(r *http.Request) string {
	a, err := netip.ParseAddr(clientAddr(r, g.proxies))
	if err != nil {
		return r.RemoteAddr
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// try takes one try for the address before its token is compared: when
// the address used up its wrong tokens it returns how long it must still
// wait (the refusal counted for its next log line). A try is a wrong token
// until right gives it back, so that tries racing each other cannot pass
// the limit together.
func (g *tokenGuard) try(addr string) (time.Duration, bool) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entry(addr, now)
	if !now.Before(e.start.Add(g.limit.Window)) {
		e.start, e.wrong = now, 0
	}
	if e.wrong >= g.limit.Wrong {
		e.unShut++
		g.summary(addr, e, now)
		return e.start.Add(g.limit.Window).Sub(now), true
	}
	e.wrong++
	return 0, false
}

// entry is the address's window, made when it has none; past maxGuessers,
// an address the guard does not know shares one window with the others.
func (g *tokenGuard) entry(addr string, now time.Time) *guesser {
	if e := g.addrs[addr]; e != nil {
		return e
	}
	if len(g.addrs) >= maxGuessers {
		g.forget(now)
	}
	if len(g.addrs) >= maxGuessers {
		addr = sharedGuesser
		if e := g.addrs[addr]; e != nil {
			return e
		}
	}
	e := &guesser{start: now}
	g.addrs[addr] = e
	return e
}

// right gives back the try of a token that opened the route, or that is
// one of the service's on the wrong route: no guess.
func (g *tokenGuard) right(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.addrs[addr]
	if e == nil {
		e = g.addrs[sharedGuesser]
	}
	if e == nil || e.wrong == 0 {
		return
	}
	e.wrong--
	if e.wrong == 0 && e.logged.IsZero() && addr != sharedGuesser {
		delete(g.addrs, addr) // nothing to remember
	}
}

// wrong logs a wrong token from the address (its try stays taken): the
// first of a window, the one that shuts the address, and else a summary
// at most once a window.
func (g *tokenGuard) wrong(addr, route string) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.addrs[addr]
	if e == nil {
		if e = g.addrs[sharedGuesser]; e == nil {
			return
		}
		addr = sharedGuesser
	}
	e.unWrong++
	switch {
	case e.wrong == g.limit.Wrong:
		g.log.Warn("wrong tokens: this address is answered 429 until its window ends", "addr", addr, "route", route,
			"wrong", e.wrong, "window", g.limit.Window, "until", e.start.Add(g.limit.Window).Format(time.RFC3339))
		e.logged, e.unWrong, e.unShut = now, 0, 0
	case e.logged.IsZero() || now.Sub(e.logged) >= g.limit.Window:
		g.log.Warn("wrong token", "addr", addr, "route", route, "wrong_since_last_line", e.unWrong,
			"refused_since_last_line", e.unShut)
		e.logged, e.unWrong, e.unShut = now, 0, 0
	}
}

// summary logs what an address did since its last line, at most once a
// window.
func (g *tokenGuard) summary(addr string, e *guesser, now time.Time) {
	if now.Sub(e.logged) < g.limit.Window {
		return
	}
	g.log.Warn("wrong tokens: this address is still answered 429", "addr", addr, "wrong_since_last_line", e.unWrong,
		"refused_since_last_line", e.unShut, "until", e.start.Add(g.limit.Window).Format(time.RFC3339))
	e.logged, e.unWrong, e.unShut = now, 0, 0
}

// forget drops the addresses whose window and log interval both ended:
// what they did was logged, and a new window starts afresh.
func (g *tokenGuard) forget(now time.Time) {
	for k, e := range g.addrs {
		if now.Sub(e.start) >= g.limit.Window && now.Sub(e.logged) >= g.limit.Window {
			delete(g.addrs, k)
		}
	}
}

// refuseGuesser answers 429 when the request's address used up its wrong
// tokens, before any token is compared; else the request holds a try of
// the address, which a right token gives back (h.guard.right). It returns
// the address either way.
func (h *Handler) refuseGuesser(c *gin.Context) (addr string, refused bool) {
	addr = h.guard.key(c.Request)
	wait, shut := h.guard.try(addr)
	if !shut {
		return addr, false
	}
	c.Set(logQuiet, true)
	c.Header("Retry-After", retryAfter(wait))
	h.apiError(c, http.StatusTooManyRequests, "too_many_wrong_tokens",
		"too many wrong tokens from this address: every request from it is refused until "+retryAfter(wait)+
			" s have passed, whatever its token", nil)
	return addr, true
}
