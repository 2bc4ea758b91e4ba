package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/retryaudit/retryaudit/audit/store/driver"
	"github.com/retryaudit/retryaudit/audit/store/postgres"
	"github.com/retryaudit/retryaudit/audit/store/sqlite"
)

// pickDriver chooses the driver that opts.URL names and resolves the URL
// into the driver's data source name and a name for people (a file path, or
// the URL without its password).
func pickDriver(opts Options) (driver.Driver, string, string, error) {
	switch u := opts.URL; {
	case u == "", strings.HasPrefix(u, "sqlite:"):
		dsn, path, err := sqlite.DataSource(u, opts.DataDir, opts.SQLiteSyncNormal)
		return sqlite.Driver{}, dsn, path, err
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		dsn, where, pooled, err := postgres.DataSource(u)
		return postgres.Driver{TransactionPooling: pooled}, dsn, where, err
	}
	return nil, "", "", fmt.Errorf("audit: database URL must start with postgres://, postgresql:// or sqlite:")
}

// t converts a time into a query argument.
func (s *Store) t(t time.Time) any { return s.drv.Time(t) }
