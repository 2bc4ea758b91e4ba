package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/digest"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/people"
	"github.com/retryaudit/retryaudit/retries"
	"github.com/retryaudit/retryaudit/slackact"
)

// app is the wiring shared by the commands: the store and the clients of
// what the configuration names.
type app struct {
	cfg   config
	store *store.Store
	n8n   *n8n.Client // nil without RETRYAUDIT_N8N_API_URL
	// others are the other n8n instances' API clients, by name (nil
	// without their API).
	others  map[string]*n8n.Client
	log     *slog.Logger
	metrics *metrics.Metrics
	retrier *retries.Retrier
	owner   string // this process, for leases

	slackOnce sync.Once
	slack     *slackact.Handler // the button presses' handler: see slackHandler
	// lookups runs the sources' CRM lookups (RETRYAUDIT_CRM_LOOKUP): the
	// pages, the API and Slack share it.
	lookups *people.Lookups
}

// openApp opens the store with the configuration's settings. exclusive
// locks a SQLite file for this process (serve).
func openApp(ctx context.Context, cfg config, log *slog.Logger, m *metrics.Metrics, exclusive bool) (*app, error) {
	a := &app{cfg: cfg, log: log, metrics: m, owner: instanceName()}
	opts := store.Options{
		URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Exclusive: exclusive, ReviewAfter: cfg.ReviewAfter,
		Metrics: m, Logger: log, MaxConns: cfg.DBMaxConns, LockTimeout: cfg.DBLockTimeout,
		Batching:         store.Batching{Queue: cfg.QueueSize, Wait: cfg.QueueWait, MaxBatch: cfg.MaxBatch},
		SQLiteSyncNormal: cfg.SQLiteSyncNormal,
		GaugeInterval:    cfg.MetricsInterval,
		AlertRepeat:      cfg.AlertRepeat,
		MaxRun:           cfg.N8NMaxRun,
		Redactor:         n8n.Redactor{},
	}
	if cfg.N8NAPIURL != "" {
		a.n8n = n8n.New(cfg.N8NAPIURL, cfg.N8NAPIKey, m)
		a.n8n.Log = log.With("n8n_instance", audit.DefaultInstance)
		opts.Lookup = a.n8n
	}
	if len(cfg.Instances) > 0 {
		l := &lookupByInstance{clients: map[string]*n8n.Client{audit.DefaultInstance: a.n8n}, links: a.links("")}
		a.others = map[string]*n8n.Client{}
		anyAPI := a.n8n != nil
		for _, in := range cfg.Instances {
			var c *n8n.Client
			if in.APIURL != "" {
				c, anyAPI = n8n.New(in.APIURL, in.APIKey, m), true
				c.Log = log.With("n8n_instance", in.Name)
			}
			a.others[in.Name], l.clients[in.Name] = c, c
		}
		if anyAPI {
			opts.Lookup = l
		}
	}
	var err error
	a.store, err = store.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	rc := retries.Config{Store: a.store, Rate: cfg.RetryRate, InFlight: cfg.RetryInFlight, Owner: a.owner,
		Metrics: m, Log: log.With("component", "retries")}
	apis := &lookupByInstance{clients: map[string]*n8n.Client{audit.DefaultInstance: a.n8n}, links: a.links("")}
	for name, c := range a.others {
		apis.clients[name] = c
	}
	for _, c := range apis.clients {
		if c != nil {
			rc.N8N = apis
		}
	}
	a.retrier = retries.New(rc)
	if a.lookups, err = people.NewLookups(a.store, a.links(""), n8n.Redactor{}, m, cfg.CRMLookups); err != nil {
		a.store.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) links(base string) audit.Links {
	return audit.Links{BaseURL: base, N8NEditorURL: a.cfg.N8NEditorURL, CRM: a.cfg.CRMLinks,
		Instances: a.cfg.editorURLs()}
}

// jobs are the background loops of one serve process.
type jobs struct {
	ctx    context.Context // ends at the stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// run runs fn until ctx ends.
func (j *jobs) run(ctx context.Context, fn func(context.Context) error) {
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		fn(ctx)
	}()
}

func (j *jobs) stop() {
	j.cancel()
	j.wg.Wait()
}

// every runs fn at each interval until ctx ends, logging failures when they
// start and when they end rather than at every tick.
func (j *jobs) every(ctx context.Context, log *slog.Logger, name string, interval time.Duration, fn func(context.Context) error) {
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		failing := false
		for {
			err := fn(ctx)
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				log.Warn("background job failing", "job", name, "err", err)
				failing = true
			case err == nil && failing:
				log.Info("background job recovered", "job", name)
				failing = false
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// outboxWorkers is how many workers of each instance send alerts: a slow
// Slack answer holds one row, not the whole outbox. Pacing per channel is
// shared by every worker of every instance.
const outboxWorkers = 2

func (a *app) startJobs(ctx context.Context, cfg config, base string) (*jobs, error) {
	renderer := notify.NewRenderer(a.links(base), nil)
	renderer.Actions = a.actionButtons()
	notifier := newNotifier(cfg)
	if notifier == nil {
		a.log.Warn("Slack is not configured: alerts are recorded, not sent (" + notify.NotConfigured + ")")
	}
	ctx, cancel := context.WithCancel(ctx)
	j := &jobs{ctx: ctx, cancel: cancel}
	logged := &notify.Once{} // each reason logged once per instance, not once per worker
	worker := func(i int) *notify.Worker {
		return &notify.Worker{Store: a.store, Notifier: notifier, Renderer: renderer, Log: a.log,
			Owner: fmt.Sprintf("%s/outbox-%d", a.owner, i), Logged: logged}
	}
	for i := 1; i <= outboxWorkers; i++ {
		j.run(ctx, worker(i).Run)
	}
	j.run(ctx, func(ctx context.Context) error {
		// Once per redactor version: what an earlier version stored
		// unredacted is redacted now.
		n, err := a.store.RedactStored(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Warn("redacting stored errors failed; it runs again at the next start", "err", err)
		case n > 0:
			a.log.Info("redacted credentials in stored errors and alerts", "values", n)
		}
		return err
	})
	j.run(ctx, func(ctx context.Context) error { a.retrier.Watch(ctx); return nil })
	j.every(ctx, a.log, "stale detector", time.Minute, func(ctx context.Context) error {
		_, err := a.store.DetectStale(ctx)
		return err
	})
	a.startSlack(ctx, j)
	if cfg.DigestOn {
		m := &digest.Maker{Store: a.store, At: cfg.DigestAt, TZ: cfg.DigestTZ, Log: a.log}
		j.every(ctx, a.log, "daily digest", time.Minute, func(ctx context.Context) error {
			_, err := m.Tick(ctx)
			return err
		})
	}
	j.leased(ctx, a.store, a.log, a.owner, "retention", 10*time.Minute, a.retention)
	j.leased(ctx, a.store, a.log, a.owner, "stats", 5*time.Minute, a.store.CompactStats)
	reconcile := func(instance string, c *n8n.Client) {
		if c == nil {
			return
		}
		r := &n8n.Reconciler{Client: c, Store: a.store, Log: a.log.With("n8n_instance", instance),
			Metrics: a.metrics, Grace: cfg.N8NReconcileGrace, Lookback: cfg.N8NReconcileLookback, Instance: instance}
		lease := "reconcile"
		if instance != audit.DefaultInstance {
			lease += audit.InstanceSep + instance
		}
		j.leased(ctx, a.store, a.log, a.owner, lease, cfg.N8NPoll, func(ctx context.Context) error {
			// n8n's failures are logged by its client, once per change
			// of state: the job logs only its own.
			if err := r.Run(ctx); !n8n.IsAPIFailure(err) {
				return err
			}
			return nil
		})
	}
	reconcile(audit.DefaultInstance, a.n8n)
	for _, in := range cfg.Instances {
		reconcile(in.Name, a.others[in.Name])
	}
	return j, nil
}

// retention deletes what RETRYAUDIT_RETENTION and
// RETRYAUDIT_PAYLOAD_RETENTION no longer keep; it runs under a lease, on one
// instance at a time.
func (a *app) retention(ctx context.Context) error {
	now := time.Now()
	p, err := a.store.PruneAll(ctx, now.Add(-a.cfg.Retention), now.Add(-a.cfg.PayloadRetention))
	if p != (audit.Pruned{}) {
		a.log.Info("retention", "events", p.Events, "errors", p.Errors, "executions", p.Executions,
			"payloads_dropped", p.Payloads)
	}
	if err != nil {
		return err
	}
	// The audit log's actions that touch no entry are kept as long as the
	// events' history is.
	n, err := people.Prune(ctx, a.store, now.Add(-a.cfg.Retention))
	if n > 0 {
		a.log.Info("retention", "audit_log_actions", n)
	}
	if err != nil {
		return err
	}
	n, err = a.retrier.Prune(ctx, now.Add(-a.cfg.Retention))
	if n > 0 {
		a.log.Info("retention", "retries", n)
	}
	return err
}

// instanceName names this process in leases: host, pid and a random part.
func instanceName() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
