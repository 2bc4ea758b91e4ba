package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"text/tabwriter"
	"time"
)

// costRow is one measurement of what a claim costs.
type costRow struct {
	bin                 string
	round               int
	claims              measured
	svcCPU, pgCPU       time.Duration // over the run
	trips               float64       // round trips per batch
	pgbenchTPS          float64
	pgbenchCPUPerInsert time.Duration
}

// benchCost measures, at each client count on PostgreSQL, what a claim
// costs: the service's CPU and PostgreSQL's CPU per claim (read from /proc,
// the backends of its database: see backendCPU), beside PostgreSQL's CPU per insert of
// the seed's one statement under pgbench in the same round, the throughput
// ratio, p99 and round trips per batch. With old set, the old binary and
// the new one run alternately, rounds times, each on a database of its own.
func benchCost(ctx context.Context, o options, old string, rounds int) error {
	bins := []string{o.bin}
	if old != "" {
		bins = []string{old, o.bin}
	}
	dbs := map[string]*database{}
	for _, bin := range bins {
		db, err := createDatabase(ctx)
		if err != nil {
			return err
		}
		defer db.drop()
		dbs[bin] = db
	}
	var rows []costRow
	for _, c := range o.clients {
		for round := 1; round <= rounds; round++ {
			meter := backendCPU(dbs[o.bin].name)
			pg, err := dbs[o.bin].pgbench(ctx, c, int(o.duration.Seconds()))
			spent := meter()
			if err != nil {
				return err
			}
			perInsert := time.Duration(float64(spent) / (pg.TPS * o.duration.Seconds()))
			for _, bin := range bins {
				r, err := costOf(ctx, o, bin, dbs[bin], c)
				if err != nil {
					return err
				}
				r.round, r.pgbenchTPS, r.pgbenchCPUPerInsert = round, pg.TPS, perInsert
				fmt.Fprintf(os.Stderr, "%s round %d, %d clients: %.0f claims/s, service %s and PostgreSQL %s a claim; pgbench %.0f tps, %s an insert\n",
					bin, round, c, r.claims.rate(), perClaim(r.svcCPU, r.claims), perClaim(r.pgCPU, r.claims), pg.TPS, us(perInsert))
				rows = append(rows, r)
			}
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("retryaudit-bench cost: %s, %d CPUs, %s each, PostgreSQL, new keys\n\n", host, runtime.NumCPU(), o.duration)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| binary\t round\t clients\t claims/s\t ÷ pgbench tps\t p99\t service CPU a claim\t PostgreSQL CPU a claim\t PostgreSQL CPU a pgbench insert\t round trips a batch\t other answers\t")
	fmt.Fprintln(tw, "| ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "| %s\t %d\t %d\t %.0f\t %.2f\t %s\t %s\t %s\t %s\t %.1f\t %s\t\n", r.bin, r.round, r.claims.clients, r.claims.rate(),
			r.claims.rate()/r.pgbenchTPS, ms(r.claims.pct(0.99)), perClaim(r.svcCPU, r.claims), perClaim(r.pgCPU, r.claims),
			us(r.pgbenchCPUPerInsert), r.trips, r.claims.others())
	}
	tw.Flush()
	return nil
}

// costOf runs bin on db and measures c clients claiming.
func costOf(ctx context.Context, o options, bin string, db *database, c int) (costRow, error) {
	svc, err := startService(ctx, bin, map[string]string{"RETRYAUDIT_DATABASE_URL": db.url()})
	if err != nil {
		return costRow{}, err
	}
	defer svc.stop()
	w := &workload{run: fmt.Sprintf("c%d", time.Now().UnixNano())}
	closedLoop(ctx, svc, c, 2*time.Second, w.request("claim")) // warm: connections, statements, caches
	if err := db.analyze(ctx); err != nil {
		return costRow{}, err
	}
	before, cpu0, meter := svc.scrapeStatements(), svc.cpu(), backendCPU(db.name)
	m := closedLoop(ctx, svc, c, o.duration, w.request("claim"))
	r := costRow{bin: bin, claims: m, svcCPU: svc.cpu() - cpu0, pgCPU: meter()}
	r.claims.clients = c
	_, r.trips = profile(before, svc.scrapeStatements(), m.n)
	return r, nil
}

// perClaim is CPU time per claim answered 200.
func perClaim(cpu time.Duration, m measured) string {
	n := m.rate() * m.elapsed.Seconds()
	if n == 0 {
		return "-"
	}
	return us(time.Duration(float64(cpu) / n))
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
