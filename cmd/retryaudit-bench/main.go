// Command retryaudit-bench measures the service side by side with raw
// PostgreSQL, in one run on one machine, and prints the table the README
// carries.
//
//	retryaudit-bench http      pgbench of the seed's one-statement claim, then the
//	                           service's HTTP claims, outcomes and error intake,
//	                           at 1, 8, 32 and 64 clients, on PostgreSQL and SQLite
//	retryaudit-bench cost      a claim's CPU on PostgreSQL (the service's and
//	                           PostgreSQL's, from /proc) beside pgbench's per
//	                           insert; -old alternates an older binary
//	retryaudit-bench overload  twice the measured claim capacity for a while:
//	                           every answer must be 200, or 503 with Retry-After
//	                           within a second
//
// It builds nothing: -bin names the retryaudit binary (make bench-http builds
// it). PostgreSQL is reached with PG* variables (default 127.0.0.1:5432, user
// postgres); a database is made for the run and dropped after.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "retryaudit-bench:", err)
		os.Exit(1)
	}
}

// options are the flags both commands share.
type options struct {
	bin      string
	clients  []int
	duration time.Duration
	dialects []string
	kinds    []string
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: retryaudit-bench http|cost|overload [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var o options
	var clients, dialects, kinds string
	fs.StringVar(&o.bin, "bin", "bin/retryaudit", "the retryaudit binary")
	fs.StringVar(&clients, "clients", "1,8,32,64", "client counts")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each measurement runs")
	fs.StringVar(&dialects, "db", "postgres,sqlite", "databases")
	fs.StringVar(&kinds, "kinds", "claim,outcome,error", "what the service is asked: claim, outcome, error")
	overloadFor := fs.Duration("overload-for", 60*time.Second, "overload: how long twice the capacity is offered")
	old := fs.String("old", "", "cost: an older retryaudit binary, run alternately with -bin")
	rounds := fs.Int("rounds", 2, "cost: rounds of each binary")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	for _, c := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("-clients: %q is not a number of clients", c)
		}
		o.clients = append(o.clients, n)
	}
	o.dialects = strings.Split(dialects, ",")
	o.kinds = strings.Split(kinds, ",")
	if _, err := os.Stat(o.bin); err != nil {
		return fmt.Errorf("-bin: %w (make bench-http builds it)", err)
	}
	switch args[0] {
	case "http":
		return benchHTTP(ctx, o)
	case "overload":
		return benchOverload(ctx, o, *overloadFor)
	case "cost":
		return benchCost(ctx, o, *old, *rounds)
	}
	return fmt.Errorf("unknown command %q: http, cost or overload", args[0])
}
