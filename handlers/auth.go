package handlers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"unicode"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"
)

// UIConfig says who may read the pages and sign their forms.
type UIConfig struct {
	// Users maps a name to a bcrypt hash, for HTTP Basic sign-in.
	Users map[string][]byte
	// TrustHeader, when set, takes the user's name from this request
	// header instead (behind a proxy that signs people in, such as
	// oauth2-proxy with X-Forwarded-User). Basic sign-in is then off.
	TrustHeader string
	// CSRFKey signs the forms' tokens; every instance must share it.
	CSRFKey []byte
}

// ctxUser is the context key of the signed-in person's name.
const ctxUser = "retryaudit.user"

// dummyHash keeps the time of a sign-in with an unknown name the same as
// with a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("retryaudit"), bcrypt.DefaultCost)

// signIn lets a page request through only with a known user. The /v1 token
// is not a password here, and page credentials do not open /v1.
type signIn struct {
	cfg UIConfig
	mu  sync.Mutex
	ok  map[[32]byte]bool // passwords already checked, by hash: bcrypt is slow on purpose
}

func (s *signIn) user(r *http.Request) (string, bool) {
	if s.cfg.TrustHeader != "" {
		name := strings.TrimSpace(r.Header.Get(s.cfg.TrustHeader))
		if name == "" || len(name) > 200 || strings.IndexFunc(name, unicode.IsControl) >= 0 {
			return "", false
		}
		return name, true
	}
	name, pass, ok := r.BasicAuth()
	if !ok {
		return "", false
	}
	key := sha256.Sum256([]byte(name + "\x00" + pass))
	s.mu.Lock()
	known := s.ok[key]
	s.mu.Unlock()
	if known {
		return name, true
	}
	hash, exists := s.cfg.Users[name]
	if !exists {
		bcrypt.CompareHashAndPassword(dummyHash, []byte(pass))
		return "", false
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(pass)) != nil {
		return "", false
	}
	s.mu.Lock()
	if len(s.ok) > 1000 {
		s.ok = map[[32]byte]bool{}
	}
	s.ok[key] = true
	s.mu.Unlock()
	return name, true
}

// requireUser is the pages' middleware: security headers on every answer,
// then sign-in.
func (h *Handler) requireUser(c *gin.Context) {
	pageHeaders(c)
	user, ok := h.signIn.user(c.Request)
	if !ok {
		if h.cfg.UI.TrustHeader == "" {
			c.Header("WWW-Authenticate", `Basic realm="retryaudit", charset="UTF-8"`)
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

// csrfToken is the token the forms of user carry.
func (h *Handler) csrfToken(user string) string {
	m := hmac.New(sha256.New, h.cfg.UI.CSRFKey)
	m.Write([]byte("csrf\x00" + user))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF accepts a form only with its user's token and, when the browser
// says where the form came from, only from this site.
func (h *Handler) checkCSRF(c *gin.Context) bool {
	if len(h.cfg.UI.CSRFKey) == 0 {
		return false
	}
	if site := c.GetHeader("Sec-Fetch-Site"); site == "cross-site" {
		return false
	}
	if origin := c.GetHeader("Origin"); origin != "" && origin != "null" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != c.Request.Host {
			return false
		}
	}
	want := h.csrfToken(c.GetString(ctxUser))
	return hmac.Equal([]byte(c.PostForm("csrf")), []byte(want))
}
