package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// pool holds the keys the claims created, for outcomes and errors to use.
type pool struct {
	mu   sync.Mutex
	keys []int64
}

func (p *pool) put(i int64) {
	p.mu.Lock()
	p.keys = append(p.keys, i)
	p.mu.Unlock()
}

func (p *pool) take() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.keys) == 0 {
		return 0, false
	}
	i := p.keys[len(p.keys)-1]
	p.keys = p.keys[:len(p.keys)-1]
	return i, true
}

// workload makes the calls of one kind. Claims are new keys; outcomes report
// done for claimed keys; errors are n8n error payloads of executions that
// claimed keys (each linked to its event).
type workload struct {
	run      string
	claimed  pool
	reported pool
	next     int64
	mu       sync.Mutex
}

func (w *workload) newKey() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	return w.next
}

func (w *workload) request(kind string) request {
	switch kind {
	case "outcome":
		return func(int64) (string, string, bool) {
			k, ok := w.claimed.take()
			if !ok {
				return "", "", false
			}
			w.reported.put(k)
			return "/v1/outcomes", fmt.Sprintf(`{"source":"bench","event_id":"%s-%d","execution_id":"%s-x%d","workflow_id":"wf1","outcome":"done","crm_ref":"CRM-%d","run_stamp":"%s-x%d:1764925200000:b"}`,
				w.run, k, w.run, k, k, w.run, k), true
		}
	case "error":
		return func(int64) (string, string, bool) {
			k, ok := w.reported.take()
			if !ok {
				return "", "", false
			}
			return "/v1/n8n/errors", fmt.Sprintf(`{"execution":{"id":"%s-x%d","mode":"webhook","lastNodeExecuted":"Answer the sender","error":{"message":"the sender went away"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`,
				w.run, k), true
		}
	}
	return func(int64) (string, string, bool) {
		k := w.newKey()
		w.claimed.put(k)
		return "/v1/claims", fmt.Sprintf(`{"source":"bench","event_id":"%s-%d","execution_id":"%s-x%d","workflow_id":"wf1","workflow_name":"Orders to CRM","node":"Claim event","run_stamp":"%s-x%d:1764925200000:b"}`,
			w.run, k, w.run, k, w.run, k), true
	}
}

// row is one line of the table.
type row struct {
	db, kind  string
	clients   int
	pgbench   pgbenchResult
	m         measured
	peakRSSMB float64
	// tripsPerBatch is the database round trips per batch, commit
	// included, from the service's metrics; 0 when not batched.
	tripsPerBatch float64
}

func benchHTTP(ctx context.Context, o options) error {
	var rows []row
	for _, dialect := range o.dialects {
		r, err := benchDialect(ctx, o, strings.TrimSpace(dialect))
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	printTable(rows, o)
	return nil
}

// benchDialect measures one database. On PostgreSQL pgbench runs just before
// the service at each client count, on the same server, so that both see the
// machine as it is at that moment.
func benchDialect(ctx context.Context, o options, dialect string) ([]row, error) {
	env := map[string]string{}
	var db *database
	if dialect == "postgres" {
		var err error
		if db, err = createDatabase(ctx); err != nil {
			return nil, err
		}
		defer db.drop()
		env["RETRYAUDIT_DATABASE_URL"] = db.url()
	} else if dialect != "sqlite" {
		return nil, fmt.Errorf("-db: %q is neither postgres nor sqlite", dialect)
	}
	svc, err := startService(ctx, o.bin, env)
	if err != nil {
		return nil, err
	}
	defer svc.stop()
	w := &workload{run: fmt.Sprintf("b%d", time.Now().UnixNano())}
	if db != nil {
		// A few seconds of each kind of request, then ANALYZE, as
		// autovacuum does within a minute of a table's growth: on tables
		// it takes for empty, the planner hashes whole tables to update a
		// batch's rows (measured: 4 ms for one write of 9 claims at 10,000
		// entries), which is a fresh database's first minute, not the
		// service's steady state.
		for _, kind := range o.kinds {
			closedLoop(ctx, svc, 8, 2*time.Second, w.request(strings.TrimSpace(kind)))
		}
		if err := db.analyze(ctx); err != nil {
			return nil, err
		}
	}
	var rows []row
	for _, c := range o.clients {
		var pg pgbenchResult
		if db != nil {
			if pg, err = db.pgbench(ctx, c, int(o.duration.Seconds())); err != nil {
				return nil, err
			}
			fmt.Fprintf(os.Stderr, "pgbench %2d clients: %.0f tps, %.2f ms\n", c, pg.TPS, pg.LatencyMS)
		}
		for _, kind := range o.kinds {
			kind = strings.TrimSpace(kind)
			before := svc.scrapeStatements()
			m := closedLoop(ctx, svc, c, o.duration, w.request(kind))
			_, peak := svc.rss()
			r := row{db: dialect, kind: kind, clients: c, m: m, peakRSSMB: peak}
			if kind == "claim" {
				r.pgbench = pg
			}
			var where string
			where, r.tripsPerBatch = profile(before, svc.scrapeStatements(), m.n)
			fmt.Fprintf(os.Stderr, "%s %s %2d clients: %.0f/s p50 %s p99 %s %s\n  %s\n", dialect, kind, c, m.rate(),
				ms(m.pct(0.5)), ms(m.pct(0.99)), m.others(), where)
			rows = append(rows, r)
		}
	}
	return rows, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func printTable(rows []row, o options) {
	host, _ := os.Hostname()
	fmt.Printf("retryaudit-bench http: %s, %d CPUs, %s each, new keys; PostgreSQL with its durability as configured\n\n",
		host, runtime.NumCPU(), o.duration)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| database\t what\t clients\t pgbench tps\t service/s\t ratio\t p50 / p99\t round trips per batch\t peak RSS\t other answers\t")
	fmt.Fprintln(tw, "| ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t")
	for _, r := range rows {
		pgtps, ratio := "", ""
		if r.pgbench.TPS > 0 {
			pgtps = fmt.Sprintf("%.0f (%.2f ms)", r.pgbench.TPS, r.pgbench.LatencyMS)
			ratio = fmt.Sprintf("%.2f", r.m.rate()/r.pgbench.TPS)
		}
		trips := ""
		if r.tripsPerBatch > 0 {
			trips = fmt.Sprintf("%.1f", r.tripsPerBatch)
		}
		fmt.Fprintf(tw, "| %s\t %s\t %d\t %s\t %.0f\t %s\t %s / %s\t %s\t %.0f MB\t %s\t\n", r.db, r.kind, r.clients, pgtps,
			r.m.rate(), ratio, ms(r.m.pct(0.5)), ms(r.m.pct(0.99)), trips, r.peakRSSMB, r.m.others())
	}
	tw.Flush()
}
