package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// openPostgres opens a pool whose every connection runs with a
// lock_timeout: a statement that meets a row locked by another session (a
// transaction from n8n's Postgres node, say) fails with 55P03 after it,
// instead of holding a pooled connection for as long as the lock lasts.
// The setting is made per connection with SET, which PgBouncer's session
// pooling keeps.
func openPostgres(dsn string, lockTimeout time.Duration) (*sqlx.DB, error) {
	c, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	setup := fmt.Sprintf("SET lock_timeout = %d", lockTimeout.Milliseconds())
	return sqlx.NewDb(sql.OpenDB(sessionConnector{Connector: c, setup: setup}), "postgres"), nil
}

// sessionConnector runs setup on each new connection.
type sessionConnector struct {
	*pq.Connector
	setup string
}

// Connect opens a connection and applies the session's settings.
func (c sessionConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if ex, ok := conn.(driver.ExecerContext); ok {
		if _, err := ex.ExecContext(ctx, c.setup, nil); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}
