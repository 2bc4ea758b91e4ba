package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/metrics"
)

const serveUsage = `serve listens on RETRYAUDIT_ADDR, applies pending migrations, and runs the
background jobs: the Slack outbox, the stale detector, n8n reconciliation (when
the n8n API is configured) and retention. SIGTERM or SIGINT drains in-flight
requests, stops the jobs and closes the database.`

func serve(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(out, cfg.LogLevel)
	m := metrics.New()
	app, err := openApp(ctx, cfg, log, m, true)
	if err != nil {
		return err
	}
	defer app.store.Close()
	if err := app.store.Migrate(ctx); err != nil {
		return err
	}
	token, err := apiToken(cfg, out)
	if err != nil {
		return err
	}
	hookToken, err := hookToken(cfg, out)
	if err != nil {
		return err
	}
	ui, err := uiConfig(ctx, cfg, app.store, out)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("RETRYAUDIT_ADDR: %w", err)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://" + ln.Addr().String()
	}
	h, err := handlers.New(handlers.Config{Lookups: app.lookups,
		Store: app.store, Links: app.links(cfg.BaseURL), Token: token, HookToken: hookToken,
		Instances: cfg.handlerInstances(), MaxBody: cfg.MaxBody, APITimeout: cfg.APITimeout,
		AllowNoWorkflowID: cfg.AllowNoWorkflowID,
		MaxErrorBody:      cfg.MaxErrorBody, BodyBudget: cfg.BodyBudget, WriteProbe: cfg.WriteProbe,
		ServeMetrics: cfg.MetricsAddr == "", Metrics: m, UI: ui, Logger: log, Retrier: app.retrier,
		SlackInteractions: app.interactions(),
	})
	if err != nil {
		ln.Close()
		return err
	}
	jobs, err := app.startJobs(ctx, cfg, cfg.BaseURL)
	if err != nil {
		ln.Close()
		return err
	}
	jobs.run(jobs.ctx, func(ctx context.Context) error { h.ProbeWrites(ctx); return nil })
	srv := newServer(h.Engine(), newConnTracker(cfg.connLimits(), log))
	servers := []*http.Server{srv}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if cfg.MetricsAddr != "" {
		msrv := newServer(handlers.MetricsHandler(m), newConnTracker(metricsConnLimits, log))
		servers = append(servers, msrv)
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			srv.Close()
			jobs.stop()
			return fmt.Errorf("RETRYAUDIT_METRICS_ADDR: %w", err)
		}
		go func() { errc <- msrv.Serve(mln) }()
	}
	fmt.Fprintf(out, "retryaudit %s serving on %s (%s: %s)\n", version, cfg.BaseURL, app.store.Dialect(), app.store.Where())
	log.Info("serving", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "database", app.store.Dialect())
	if cfg.SQLiteSyncNormal && app.store.Dialect() == "sqlite" {
		log.Warn("RETRYAUDIT_SQLITE_SYNC=normal: a claim already answered may be lost on an OS crash or power loss, " +
			"and its redelivery claimed again")
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		jobs.stop()
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	log.Info("shutting down: draining requests")
	began := time.Now()
	drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(drain); err != nil {
			log.Warn("shutdown: requests still running after 30 s are cut off", "err", err)
		}
	}
	jobs.stop()
	log.Info("stopped", "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// newServer serves h with timeouts on every phase of a connection and caps
// on the connections it keeps (see connLimits): a client that opens
// connections and sends nothing is cut off after 10 s, an idle keep-alive
// connection after a minute, and neither can hold more than the caps
// conns keeps.
func newServer(h http.Handler, conns *connTracker) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnState:         conns.track,
	}
}

// metricsConnLimits are the caps of RETRYAUDIT_METRICS_ADDR's listener:
// a scraper or two.
var metricsConnLimits = connLimits{Open: 64, Idle: 16}

func newLogger(out io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))
}

// apiToken returns RETRYAUDIT_TOKEN, or the token kept in the data dir,
// generated at first start and printed once with the header n8n needs.
func apiToken(cfg config, out io.Writer) (string, error) {
	if cfg.Token != "" {
		return cfg.Token, nil
	}
	token, created, err := dataSecret(cfg.DataDir, "token")
	if err != nil {
		return "", fmt.Errorf("RETRYAUDIT_TOKEN is unset and the generated token is unusable: %w", err)
	}
	switch {
	case created && isTerminal(out):
		fmt.Fprintf(out, "retryaudit: generated the API token (kept in %s/token, mode 0600; it is printed only now).\n"+
			"  In n8n, create a Header Auth credential: name Authorization, value Bearer %s\n", cfg.DataDir, token)
	case created:
		// Not a terminal: a log stream (journald under the shipped unit)
		// that others may read. Say where it is, not what it is.
		fmt.Fprintf(out, "retryaudit: generated the API token into %s (mode 0600); read it there to configure n8n "+
			"(a Header Auth credential: name Authorization, value Bearer <token>)\n", filepath.Join(cfg.DataDir, "token"))
	default:
		fmt.Fprintf(out, "retryaudit: the API token is kept in %s\n", filepath.Join(cfg.DataDir, "token"))
	}
	return token, nil
}

// hookToken returns RETRYAUDIT_HOOK_TOKEN, or the token kept in the data
// dir, generated at first start and printed once with the variables n8n's
// environment needs to load the hooks file.
func hookToken(cfg config, out io.Writer) (string, error) {
	if cfg.HookToken != "" {
		return cfg.HookToken, nil
	}
	token, created, err := dataSecret(cfg.DataDir, "hook-token")
	if err != nil {
		return "", fmt.Errorf("RETRYAUDIT_HOOK_TOKEN is unset and the generated hook token is unusable: %w", err)
	}
	switch {
	case created && isTerminal(out):
		fmt.Fprintf(out, "retryaudit: generated the hook token (kept in %s/hook-token, mode 0600; it is printed only now).\n"+
			"  For n8n's execution hooks, set in n8n's environment: RETRYAUDIT_HOOK_TOKEN=%s\n", cfg.DataDir, token)
	case created:
		fmt.Fprintf(out, "retryaudit: generated the hook token into %s (mode 0600); n8n's execution hooks send it "+
			"(RETRYAUDIT_HOOK_TOKEN in n8n's environment)\n", filepath.Join(cfg.DataDir, "hook-token"))
	default:
		fmt.Fprintf(out, "retryaudit: the hook token is kept in %s\n", filepath.Join(cfg.DataDir, "hook-token"))
	}
	return token, nil
}

// isTerminal reports whether out is a terminal, where a generated secret
// may be shown once.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
