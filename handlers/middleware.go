package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// logDecision is the context key under which handlers leave what they
// decided, for the request's log line.
const logDecision = "retryaudit.decision"

// observe writes one log line per request (method, route, status, latency
// and the decision, never headers) and observes the request's duration.
func (h *Handler) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	took := time.Since(start)
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	if h.cfg.Metrics != nil {
		h.cfg.Metrics.HTTP.WithLabelValues(route, c.Request.Method, strconv.Itoa(status)).Observe(took.Seconds())
	}
	if c.GetBool(logQuiet) {
		return // a wrong token: the guard logs a summary per address
	}
	level := slog.LevelInfo
	if route == "/healthz" || route == "/readyz" || route == "/metrics" || strings.HasPrefix(route, "/static/") {
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{
		slog.String("method", c.Request.Method), slog.String("route", route),
		slog.String("path", c.Request.URL.EscapedPath()), slog.Int("status", status),
		slog.Duration("latency", took),
	}
	if d := c.GetString(logDecision); d != "" {
		attrs = append(attrs, slog.String("decision", d))
	}
	if user := c.GetString(ctxUser); user != "" {
		attrs = append(attrs, slog.String("user", user))
	}
	h.log.LogAttrs(c.Request.Context(), level, "request", attrs...)
}

// recover turns a panic into a 500 and a log line, keeping the server up.
func (h *Handler) recover(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.log.Error("panic in handler", "route", c.FullPath(), "panic", p)
			h.apiError(c, http.StatusInternalServerError, "internal", "internal error", nil)
		}
	}()
	c.Next()
}

// bearer lets a /v1 request through only with Authorization: Bearer and a
// token of an n8n instance, and remembers the instance. Both sides are
// hashed first and every token is compared, so the comparison takes the
// same time whatever was sent and whichever token it matches.
//
// Wrong tokens are counted per client address (GuessLimit); an address
// past its limit is answered 429 before any token is compared. A token of
// the service's on the wrong route (the hook token here) is no guess.
func (h *Handler) bearer(c *gin.Context) {
	addr, refused := h.refuseGuesser(c)
	if refused {
		return
	}
	scheme, cred, ok := strings.Cut(c.GetHeader("Authorization"), " ")
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	instance := ""
	for _, in := range h.tokens {
		if subtle.ConstantTimeCompare(got[:], in.hash[:]) == 1 {
			instance = in.name
		}
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || instance == "" {
		msg := "send the service's token as Authorization: Bearer <token>"
		if ok && tokenOf(c, h.hookTokens) != "" {
			msg = "this is the hook token, which opens only POST /v1/n8n/executions; workflows send the API token"
			h.guard.right(addr)
		} else {
			h.guard.wrong(addr, c.FullPath())
			c.Set(logQuiet, true)
		}
		c.Header("WWW-Authenticate", `Bearer realm="retryaudit"`)
		h.apiError(c, http.StatusUnauthorized, "unauthorized", msg, nil)
		return
	}
	h.guard.right(addr)
	c.Set(ctxInstance, instance)
	c.Next()
}
