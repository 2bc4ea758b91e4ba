package handlers

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/people"
)

// UIConfig says who may read the pages.
type UIConfig struct {
	// Users maps a name to a bcrypt hash, for HTTP Basic sign-in.
	Users map[string][]byte
	// TrustHeader, when set, takes the user's name from this request
	// header instead (behind a proxy that signs people in, such as
	// oauth2-proxy with X-Forwarded-User). Basic sign-in is then off.
	TrustHeader string
	// TrustedProxies are the peers whose TrustHeader and X-Forwarded-For
	// are believed; from any other peer the header is ignored.
	TrustedProxies []netip.Prefix
	// TrustedOrigins may post the pages' forms besides the service's own
	// origin (RETRYAUDIT_BASE_URL, when a proxy rewrites Host).
	TrustedOrigins []string
	// BcryptWorkers bounds the password checks running at once (default
	// half the CPUs, at least one), so that failed sign-ins never take the
	// CPU the API needs.
	BcryptWorkers int
	// Limits bound failed sign-ins (DefaultSignInLimits when zero).
	Limits SignInLimits
}

// ctxUser is the context key of the signed-in person's name.
const ctxUser = "retryaudit.user"

// verdict is the outcome of a sign-in.
type verdict int

const (
	signedIn   verdict = iota
	refused            // no or wrong credentials
	limitedOut         // too many failures: wait
	busy               // every password check is taken: try again
)

// signIn lets a page request through only with a known user. The /v1 token
// is not a password here, and page credentials do not open /v1.
type signIn struct {
	cfg    UIConfig
	log    *slog.Logger
	now    func() time.Time
	mu     sync.Mutex
	ok     map[[32]byte]bool // passwords already checked, by hash: bcrypt is slow on purpose
	byAddr *limiterSet
	byUser *limiterSet
	byAll  *limiterSet // one key: every failure counts
	// checks holds a slot per bcrypt comparison running; waiting holds a
	// slot per request queued for one. Both full: answer busy at once.
	checks, waiting chan struct{}
	// even makes every password check cost the same bcrypt work, whatever
	// the name and its hash's cost (see evenWork).
	even evenWork
}

func newSignIn(cfg UIConfig, log *slog.Logger, now func() time.Time) *signIn {
	if cfg.BcryptWorkers <= 0 {
		cfg.BcryptWorkers = max(1, runtime.GOMAXPROCS(0)/2)
	}
	return &signIn{cfg: cfg, log: log, now: now, ok: map[[32]byte]bool{}, even: newEvenWork(cfg.Users),
		byAddr: newLimiterSet("address", cfg.Limits.PerAddress.or(DefaultSignInLimits.PerAddress), log),
		byUser: newLimiterSet("user", cfg.Limits.PerUser.or(DefaultSignInLimits.PerUser), log),
		byAll:  newLimiterSet("scope", cfg.Limits.Everyone.or(DefaultSignInLimits.Everyone), log),
		checks: make(chan struct{}, cfg.BcryptWorkers), waiting: make(chan struct{}, 4*cfg.BcryptWorkers)}
}

// user signs a request in. wait is set when the verdict is limitedOut.
func (s *signIn) user(r *http.Request) (name string, v verdict, wait time.Duration) {
	if s.cfg.TrustHeader != "" {
		if !trusted(peer(r), s.cfg.TrustedProxies) {
			return "", refused, 0 // anyone can send the header; only the proxy is believed
		}
		name := strings.TrimSpace(r.Header.Get(s.cfg.TrustHeader))
		if name == "" || len(name) > 200 || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
			return "", refused, 0
		}
		return name, signedIn, 0
	}
	name, pass, ok := r.BasicAuth()
	if !ok {
		return "", refused, 0
	}
	key := sha256.Sum256([]byte(name + "\x00" + pass))
	s.mu.Lock()
	known := s.ok[key]
	s.mu.Unlock()
	if known {
		return name, signedIn, 0
	}
	// The per-address and per-name limits first, then the bucket for
	// everyone: the strangers' half when this address failed again and
	// again, else the half of first tries. Each is given back unless the
	// password turns out wrong, so only failures are charged.
	now := s.now()
	addr := clientAddr(r, s.cfg.TrustedProxies)
	byAddr, wait := s.byAddr.reserve(addr, now)
	if byAddr == nil {
		return "", limitedOut, wait
	}
	byUser, wait := s.byUser.reserve(audit.Truncate(name, 100), now)
	if byUser == nil {
		byAddr.CancelAt(now)
		return "", limitedOut, wait
	}
	scope := scopeFirstTries
	if s.byAddr.stranger(addr, now) {
		scope = scopeStrangers
	}
	byAll, wait := s.byAll.reserve(scope, now)
	if byAll == nil {
		byAddr.CancelAt(now)
		byUser.CancelAt(now)
		return "", limitedOut, wait
	}
	good, ran := s.check(r, name, pass)
	if !good || !ran {
		if !ran {
			byAddr.CancelAt(now)
			byUser.CancelAt(now)
			byAll.CancelAt(now)
			return "", busy, 0
		}
		s.byAddr.failed(addr, now)
		return "", refused, 0 // the attempt stays counted
	}
	byAddr.CancelAt(now) // a success costs nothing
	byUser.CancelAt(now)
	byAll.CancelAt(now)
	s.byAddr.succeeded(addr)
	s.mu.Lock()
	if len(s.ok) > 1000 {
		s.ok = map[[32]byte]bool{}
	}
	s.ok[key] = true
	s.mu.Unlock()
	return name, signedIn, 0
}

// check compares a password in the bounded pool; ran is false when the
// pool and its queue are full or the request gave up waiting.
func (s *signIn) check(r *http.Request, name, pass string) (good, ran bool) {
	select {
	case s.waiting <- struct{}{}:
	default:
		return false, false
	}
	defer func() { <-s.waiting }()
	select {
	case s.checks <- struct{}{}:
	case <-r.Context().Done():
		return false, false
	}
	defer func() { <-s.checks }()
	return s.even.compare(s.cfg.Users[name], pass), true
}

// requireUser is the pages' middleware: security headers on every answer,
// then sign-in.
func (h *Handler) requireUser(c *gin.Context) {
	pageHeaders(c)
	user, v, wait := h.signIn.user(c.Request)
	switch v {
	case limitedOut:
		c.Header("Retry-After", retryAfter(wait))
		h.pageError(c, http.StatusTooManyRequests, "Too many failed sign-ins",
			"Too many failed sign-ins from this address or for this name. Wait a moment, then try again.")
		return
	case busy:
		c.Header("Retry-After", "1")
		h.pageError(c, http.StatusServiceUnavailable, "Busy", "Too many sign-ins at once. Try again in a second.")
		return
	case refused:
		if h.cfg.UI.TrustHeader == "" {
			c.Header("WWW-Authenticate", `Basic realm="retryaudit", charset="UTF-8"`)
			if name, _, ok := c.Request.BasicAuth(); ok {
				h.noteRefused(c, name, audit.ViaPage)
			}
		}
		h.pageError(c, http.StatusUnauthorized, "Sign in", "Sign in to read the audit pages.")
		return
	}
	c.Set(ctxUser, user)
	c.Next()
}

// pageHeaders forbid framing, inline scripts and styles, and sending forms
// elsewhere; the pages use no JavaScript at all.
func pageHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// checkCSRF accepts a form only from this site: the browser's
// Sec-Fetch-Site, or else its Origin against the Host, through the standard
// library's cross-origin protection. Requests that carry neither (not from a
// browser) pass: they carry no ambient credentials of a victim.
func (h *Handler) checkCSRF(c *gin.Context) bool {
	return h.csrf.Check(c.Request) == nil
}

// noteRefused writes a refused sign-in (a name and a wrong password: a
// browser's first request, with no credentials, is not one) in the log of
// who did what. The per-address and per-name limits bound how many reach
// here; a log that cannot be written does not change the answer.
func (h *Handler) noteRefused(c *gin.Context, name, via string) {
	if h.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 2*time.Second)
	defer cancel()
	err := people.Note(ctx, h.store, people.Action{Actor: audit.Truncate(name, 100), Via: via,
		Action: people.ActionSignInRefused, Detail: "wrong name or password from " +
			clientAddr(c.Request, h.cfg.UI.TrustedProxies)})
	if err != nil {
		h.log.Warn("log a refused sign-in", "err", err)
	}
}

// noteRefusedAPI writes a person's sign-in that apiPerson refused (a
// name with a wrong password) in the audit log, as the pages' requireUser
// does: guessing on the API is as visible as on the pages.
func (h *Handler) noteRefusedAPI(c *gin.Context) {
	c.Next()
	if c.Writer.Status() != http.StatusUnauthorized || c.GetString(ctxUser) != "" || h.cfg.UI.TrustHeader != "" {
		return
	}
	if name, _, ok := c.Request.BasicAuth(); ok {
		h.noteRefused(c, name, audit.ViaAPI)
	}
}
