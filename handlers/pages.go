package handlers

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/templates"
)

// pageNames are the page templates; each is parsed with layout.html.
var pageNames = []string{"overview", "events", "event", "review", "execution", "errors", "error", "message", "auditlog",
	"retries", "retryrun"}

// pages holds the parsed templates.
type pages struct {
	tmpl map[string]*template.Template
	css  []byte
}

func newPages(cfg Config) (*pages, error) {
	links := cfg.Links
	paths := audit.Links{} // links within the service stay relative
	funcs := template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"ago":       func(t time.Time) string { return humanSince(cfg.Now(), t) + " ago" },
		"since":     func(t time.Time) string { return humanSince(cfg.Now(), t) },
		"eventPath": paths.Event,
		"execPath":  paths.Execution,
		"errorPath": paths.Error,
		"n8nURL":    links.N8NExecution,
		"crmURL":    links.CRMOrder,
		"short":     func(n int, s string) string { return audit.Truncate(s, n) },
		"idemKey":   audit.IdempotencyKey,
		"sub":       func(a, b float64) float64 { return a - b },
		"half":      func(a float64) float64 { return a / 2 },
		"percent":   func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"millis":    func(ms int64) time.Time { return time.UnixMilli(ms) },
		"canLookup": cfg.Lookups.Configured,
		"dict": func(kv ...string) map[string]string {
			m := map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		},
		"lookupPath": func(source, eventID string) string { return paths.Event(source, eventID) + lookupSuffix },
		// resolveForm is the form for one entry: review says whether the
		// entry waits for review (else the form asks to confirm that no
		// execution is still running); prior is what the person sent last.
		"resolveForm": func(path, item, holder string, version int64, review bool, prior any) formView {
			v := formView{Path: path, Item: item, Holder: holder, Version: version, Confirm: !review}
			if f, ok := prior.(resolveForm); ok && f.Item == item {
				v.To, v.Note, v.CRMRef = f.To, f.Note, f.CRMRef
			}
			return v
		},
	}
	p := &pages{tmpl: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templates.FS, "layout.html", "charts.html", name+".html")
		if err != nil {
			return nil, fmt.Errorf("handlers: parse page %s: %w", name, err)
		}
		p.tmpl[name] = t
	}
	css, err := fs.ReadFile(templates.FS, "static/style.css")
	if err != nil {
		return nil, fmt.Errorf("handlers: stylesheet: %w", err)
	}
	p.css = css
	return p, nil
}

// formView is what the resolution form gets. Confirm asks the person to
// confirm that no execution still runs the action.
type formView struct {
	Path, Item, Holder, To, Note, CRMRef string
	Version                              int64 // the entry's version the page showed: the form is fenced by it
	Confirm                              bool
	Button                               string // the one-click form's words ("" for "Confirm: mark …")
}

// view is what every page template gets: the page's own data in Data.
type view struct {
	Title   string
	Nav     string
	User    string
	Review  int // the review queue's size, for the navigation
	Notice  string
	Problem string
	Data    any
	// Refresh reloads the page after this many seconds (0: never).
	Refresh int
}

func (h *Handler) registerPages(r gin.IRouter) {
	r.GET("/static/style.css", func(c *gin.Context) {
		pageHeaders(c)
		c.Header("Cache-Control", "public, max-age=3600")
		c.Data(http.StatusOK, "text/css; charset=utf-8", h.pages.css)
	})
	p := r.Group("/", h.requireUser)
	p.GET("/", h.eventsPage)
	p.GET("/overview", h.overviewPage)
	p.GET("/events/:source/*event_id", h.eventPage)
	p.POST("/events/:source/*event_id", h.bodyBudget(64<<10), h.eventPost) // the resolve form, or …/lookup
	p.GET("/audit-log", h.auditLogPage)
	p.GET("/review", h.reviewPage)
	p.GET("/executions/:id", h.executionPage)
	p.GET("/exec/:key", h.executionPage) // an id that is a dot segment, base64url (audit.Links.Execution)
	p.GET("/errors", h.errorsPage)
	p.GET("/errors/:id", h.errorPage)
	p.GET("/e/:id", h.shortLink)
	h.registerRetryPages(p)
}

// render writes a page. It renders into a buffer first, so that a failing
// template answers 500, not half a page.
func (h *Handler) render(c *gin.Context, code int, name string, v view) {
	v.User = c.GetString(ctxUser)
	if v.User != "" {
		if st, err := h.store.Stats(c.Request.Context()); err == nil {
			v.Review = st.ReviewQueue
		}
	}
	var b bytes.Buffer
	if err := h.pages.tmpl[name].ExecuteTemplate(&b, "layout", v); err != nil {
		h.log.Error("render page", "page", name, "err", err)
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error"))
		return
	}
	c.Data(code, "text/html; charset=utf-8", b.Bytes())
}

// pageError answers a page request with an error page.
func (h *Handler) pageError(c *gin.Context, code int, title, message string) {
	pageHeaders(c)
	h.render(c, code, "message", view{Title: title, Data: message})
	c.Abort()
}

// pageFail answers a page request whose store call failed.
func (h *Handler) pageFail(c *gin.Context, err error) {
	code, _ := status(audit.ErrorCode(err))
	switch code {
	case http.StatusNotFound:
		h.pageError(c, code, "Not found", strings.TrimPrefix(err.Error(), "audit: "))
	case http.StatusUnprocessableEntity:
		h.pageError(c, code, "Invalid request", strings.TrimPrefix(err.Error(), "audit: "))
	case http.StatusServiceUnavailable:
		c.Header("Retry-After", "5")
		h.logDBFailure(c, slog.LevelWarn, "database unavailable", err)
		h.pageError(c, code, "Database unavailable", "The database does not answer. Nothing was changed; try again in a moment.")
	default:
		h.logDBFailure(c, slog.LevelError, "internal error", err)
		h.pageError(c, http.StatusInternalServerError, "Internal error", "Something went wrong; nothing was changed.")
	}
}

// humanSince says how long ago t was, coarsely.
func humanSince(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return audit.HumanDuration(now.Sub(t), " ")
}
