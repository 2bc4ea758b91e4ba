package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	_ "github.com/lib/pq" // the PostgreSQL driver
)

// pgEnv returns a PG* variable or its default.
func pgEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// database is a PostgreSQL database made for one run.
type database struct {
	name  string
	admin *sql.DB
}

func createDatabase(ctx context.Context) (*database, error) {
	admin, err := sql.Open("postgres", pgURL("postgres"))
	if err != nil {
		return nil, err
	}
	b := make([]byte, 4)
	rand.Read(b)
	d := &database{name: "retryaudit_bench_" + hex.EncodeToString(b), admin: admin}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+d.name); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create database (is PostgreSQL on %s?): %w", pgEnv("PGHOST", "127.0.0.1"), err)
	}
	return d, nil
}

// url is the database's URL for the service.
func (d *database) url() string { return pgURL(d.name) }

// analyze gathers the planner's statistics of every table.
func (d *database) analyze(ctx context.Context) error {
	db, err := sql.Open("postgres", d.url())
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

func (d *database) drop() {
	d.admin.Exec("DROP DATABASE IF EXISTS " + d.name + " WITH (FORCE)")
	d.admin.Close()
}

func pgURL(db string) string {
	u := url.URL{Scheme: "postgres", Host: pgEnv("PGHOST", "127.0.0.1") + ":" + pgEnv("PGPORT", "5432"), Path: "/" + db,
		User: url.User(pgEnv("PGUSER", "postgres")), RawQuery: "sslmode=disable"}
	if p := os.Getenv("PGPASSWORD"); p != "" {
		u.User = url.UserPassword(pgEnv("PGUSER", "postgres"), p)
	}
	return u.String()
}

// seedScript is the seed's claim: one statement, a new key each time.
const seedScript = `\set n random(1, 2000000000)
INSERT INTO pgbench_claims (source, event_id) VALUES ('shop', :client_id || '-' || :n || '-' || random()::text) ON CONFLICT (source, event_id) DO NOTHING RETURNING event_id;
`

// pgbenchResult is what pgbench printed.
type pgbenchResult struct {
	TPS       float64
	LatencyMS float64 // average per transaction
}

var (
	tpsLine     = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	latencyLine = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
)

// pgbench runs the seed's statement from clients for d, on the table of the
// design's shape, with the server's durability as it is.
func (d *database) pgbench(ctx context.Context, clients int, seconds int) (pgbenchResult, error) {
	db, err := sql.Open("postgres", d.url())
	if err != nil {
		return pgbenchResult{}, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS pgbench_claims (source text NOT NULL,
		event_id text NOT NULL, status text NOT NULL DEFAULT 'processing', created_at timestamptz NOT NULL DEFAULT now(),
		updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (source, event_id))`); err != nil {
		return pgbenchResult{}, err
	}
	dir, err := os.MkdirTemp("", "retryaudit-pgbench-")
	if err != nil {
		return pgbenchResult{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "claim.sql")
	if err := os.WriteFile(script, []byte(seedScript), 0o600); err != nil {
		return pgbenchResult{}, err
	}
	threads := min(clients, 2)
	cmd := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-f", script, "-c", strconv.Itoa(clients),
		"-j", strconv.Itoa(threads), "-T", strconv.Itoa(seconds), "-h", pgEnv("PGHOST", "127.0.0.1"),
		"-p", pgEnv("PGPORT", "5432"), "-U", pgEnv("PGUSER", "postgres"), d.name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return pgbenchResult{}, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	var r pgbenchResult
	if m := tpsLine.FindSubmatch(out); m != nil {
		r.TPS, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := latencyLine.FindSubmatch(out); m != nil {
		r.LatencyMS, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if r.TPS == 0 {
		return r, fmt.Errorf("pgbench printed no tps:\n%s", strings.TrimSpace(string(out)))
	}
	return r, nil
}
