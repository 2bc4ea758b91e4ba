package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/retryaudit/retryaudit/metrics"
)

const migrateUsage = `migrate applies the embedded migrations of the configured database
(RETRYAUDIT_DATABASE_URL, or the SQLite file in RETRYAUDIT_DATA_DIR) and exits.
serve applies them too; run migrate before an upgrade to see them apply alone.
Several instances may run it at once on PostgreSQL: a lock serialises them.`

func migrateCmd(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(out, cfg.LogLevel)
	a, err := openApp(ctx, cfg, log, metrics.New(), false)
	if err != nil {
		return err
	}
	defer a.store.Close()
	if err := a.store.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "retryaudit: schema is current (%s: %s)\n", a.store.Dialect(), a.store.Where())
	return nil
}
