// Package handlers is retryaudit's HTTP surface: the /v1 API that n8n calls,
// the audit pages people read, health checks and metrics.
package handlers

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/semaphore"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/people"
	"github.com/retryaudit/retryaudit/retries"
)

// Config is what the handlers need; cmd/retryaudit fills it.
type Config struct {
	Store *store.Store
	Links audit.Links
	Token string // the /v1 bearer token of the default n8n instance
	// HookToken is the bearer token of the default instance's execution
	// hooks (POST /v1/n8n/executions); it opens nothing else.
	HookToken string
	// Instances are the other n8n instances and their tokens; each needs
	// an entry in Links.Instances.
	Instances []Instance
	MaxBody   int64 // bytes
	// AllowNoWorkflowID takes claims and outcomes without workflow_id
	// (RETRYAUDIT_ALLOW_NO_WORKFLOW_ID), for calls built by hand: the
	// shipped workflows always send it, and without it the service cannot
	// tell two executions that share an id apart.
	AllowNoWorkflowID bool
	// MaxErrorBody is the hard cap of an error payload: over MaxBody it is
	// still recorded, with its payload cut; past this, only its first
	// MaxErrorBody bytes are read.
	MaxErrorBody int64
	// BodyBudget caps the bytes of request bodies held at once, over every
	// request, counted as they arrive: past it, a request is answered 503
	// with Retry-After.
	BodyBudget int64
	// APITimeout bounds how long a /v1 request may take (default 15s):
	// past it the answer is 503, better than n8n waiting for its own
	// timeout.
	APITimeout time.Duration
	// WriteProbe is how often ProbeWrites writes a row to learn whether
	// the database takes writes (default 5 s).
	WriteProbe time.Duration
	// HookConcurrency bounds the hook calls written at once (default 1 on
	// SQLite, whose one writer they would queue claims behind, and 4 on
	// PostgreSQL, a fifth of the default pool): a flood of hook calls
	// cannot take the database from claims.
	HookConcurrency int
	// Guesses bounds the wrong tokens per client address
	// (DefaultGuessLimit when zero); the address is read through
	// UI.TrustedProxies.
	Guesses GuessLimit
	// ServeMetrics exposes /metrics on this router (when no separate
	// metrics listener is configured).
	ServeMetrics bool
	Metrics      *metrics.Metrics
	UI           UIConfig
	// SlackInteractions answers POST /slack/interactions: the presses of
	// the alerts' buttons, signed by Slack (nil: no such route).
	SlackInteractions http.Handler
	// Retrier sends people's retries to n8n (nil: the retry endpoints and
	// pages are not served).
	Retrier *retries.Retrier
	// Lookups runs the CRM lookups (RETRYAUDIT_CRM_LOOKUP); nil: none.
	Lookups *people.Lookups
	Logger  *slog.Logger
	Now     func() time.Time
}

// Handler serves every route.
type Handler struct {
	cfg    Config
	store  *store.Store
	links  audit.Links
	log    *slog.Logger
	pages  *pages
	signIn *signIn
	csrf   *http.CrossOriginProtection
	bodies *semaphore.Weighted
	counts countCache
	tokens []instanceToken
	// hookTokens open POST /v1/n8n/executions only.
	hookTokens []instanceToken
	hookCalls  hookCalls
	guard      *tokenGuard
	hookSlots  chan struct{}
	health     dbHealth
}

// New checks the configuration and prepares what can fail (templates),
// so that a broken setup stops the start, not the first request.
func New(cfg Config) (*Handler, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.MaxErrorBody < cfg.MaxBody {
		cfg.MaxErrorBody = max(cfg.MaxBody, 8<<20)
	}
	if cfg.BodyBudget < cfg.MaxErrorBody {
		cfg.BodyBudget = max(cfg.MaxErrorBody, 64<<20)
	}
	h := &Handler{cfg: cfg, store: cfg.Store, links: cfg.Links, log: cfg.Logger,
		signIn: newSignIn(cfg.UI, cfg.Logger, cfg.Now), csrf: http.NewCrossOriginProtection(),
		bodies: semaphore.NewWeighted(cfg.BodyBudget),
		guard:  newTokenGuard(cfg.Guesses, cfg.UI.TrustedProxies, cfg.Logger, cfg.Now)}
	for _, o := range cfg.UI.TrustedOrigins {
		if err := h.csrf.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("handlers: trusted origin %q: %w", o, err)
		}
	}
	if cfg.HookConcurrency <= 0 {
		cfg.HookConcurrency = 4
		if cfg.Store != nil && cfg.Store.Dialect() == "sqlite" {
			cfg.HookConcurrency = 1
		}
		h.cfg.HookConcurrency = cfg.HookConcurrency
	}
	h.hookSlots = make(chan struct{}, cfg.HookConcurrency)
	h.health.probeNow = make(chan struct{}, 1)
	var err error
	if h.tokens, err = instanceTokens(cfg); err != nil {
		return nil, err
	}
	if h.hookTokens, err = checkHookTokens(h.tokens, hookTokens(cfg)); err != nil {
		return nil, err
	}
	if h.pages, err = newPages(cfg); err != nil {
		return nil, err
	}
	return h, nil
}

// Engine returns a gin engine with every route. Paths are matched escaped
// and parameters unescaped after, so an event id holding '/' or '%' (sent
// as %2F, %25) stays one path segment.
func (h *Handler) Engine() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.UseEscapedPath = true
	r.UnescapePathValues = true
	r.RemoveExtraSlash = false
	r.RedirectTrailingSlash = false
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	r.Use(h.recover, h.observe)
	r.NoRoute(func(c *gin.Context) { h.notFound(c) })
	r.NoMethod(func(c *gin.Context) {
		h.apiError(c, http.StatusMethodNotAllowed, "method_not_allowed", c.Request.Method+" is not allowed here", nil)
	})
	h.Register(r)
	return r
}

// Register is the route table.
func (h *Handler) Register(r gin.IRouter) {
	r.GET("/healthz", h.healthz)
	r.GET("/readyz", h.readyz)
	if h.cfg.ServeMetrics && h.cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(MetricsHandler(h.cfg.Metrics)))
	}

	v1 := r.Group("/v1", h.bearer, h.apiTimeout)
	v1.POST("/claims", h.bodyBudget(h.cfg.MaxBody), h.claim)
	v1.POST("/outcomes", h.bodyBudget(h.cfg.MaxBody), h.outcome)
	v1.GET("/events", h.listEvents)
	v1.GET("/events/:source/*event_id", h.getEvent)
	v1.POST("/n8n/errors", h.bodyBudget(h.cfg.MaxErrorBody), h.n8nError)
	v1.GET("/stats", h.getStats)
	// A person's acts and reads of who did what take a person's sign-in,
	// never n8n's token: …/lookup and …/retry (recorded as the person
	// signed in), the audit log (it names people and their addresses).
	r.POST("/v1/events/:source/*event_id", h.noteRefusedAPI, h.apiPerson, h.bodyBudget(64<<10), h.eventAct)
	r.GET("/v1/audit-log", h.noteRefusedAPI, h.apiPerson, h.auditLogAPI) // a CSV export bounds each read instead
	r.POST("/v1/n8n/executions", h.hookBearer, h.apiTimeout, h.bodyBudget(h.cfg.MaxBody), h.n8nExecutions)
	if h.cfg.SlackInteractions != nil {
		r.POST("/slack/interactions", gin.WrapH(h.cfg.SlackInteractions))
	}

	h.registerRetries(r)
	h.registerPages(r)
}

// MetricsHandler serves the metrics' registry.
func MetricsHandler(m *metrics.Metrics) http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// apiTimeout bounds the time a /v1 request may wait for the database: an
// answer of 503 is better than n8n waiting for its own timeout.
func (h *Handler) apiTimeout(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), h.apiTimeLimit())
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

func (h *Handler) apiTimeLimit() time.Duration { return cmp.Or(h.cfg.APITimeout, 15*time.Second) }

func (h *Handler) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz answers 200 when the database answers, its schema is current and
// its writes succeed (the write probe's last word: see ProbeWrites).
func (h *Handler) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	if err := h.store.Ping(ctx); err != nil {
		c.Header("Retry-After", "5")
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": "database does not answer"})
		return
	}
	current, err := h.store.SchemaCurrent(ctx)
	if err != nil || !current {
		c.Header("Retry-After", "5")
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": "schema is not current: run retryaudit migrate"})
		return
	}
	if h.writesFailing() != "" {
		// The error is in the log; this endpoint needs no credentials.
		c.Header("Retry-After", "5")
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable",
			"reason": "database writes fail: ready again when one succeeds (the log says why)"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "database": h.store.Dialect()})
}
