package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store/driver"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/migrations"
)

// Options configure a Store.
type Options struct {
	// URL selects the database: postgres://… or postgresql://… for
	// PostgreSQL, sqlite:PATH for a SQLite file, empty for the SQLite file
	// retryaudit.db in DataDir.
	URL     string
	DataDir string
	// Exclusive takes a lock on a SQLite file so that a second process
	// serving the same file fails at start. PostgreSQL needs none.
	Exclusive bool
	// ReviewAfter is how long an entry may stay processing without an
	// outcome before a person should look at it.
	ReviewAfter time.Duration
	// AlertRepeat is how long errors linked to no event of one kind,
	// workflow and node go into one thread before a fresh alert
	// (DefaultAlertRepeat when unset).
	AlertRepeat time.Duration
	// Lookup asks n8n about executions the service has not seen; nil
	// means no n8n API is configured.
	Lookup audit.ExecutionLookup
	// MaxRun is the longest an n8n execution runs, Wait nodes included
	// (DefaultMaxRun when unset): an execution id the service last saw
	// longer ago names a new execution that reuses it (n8n's ids start
	// again after a restore). Negative turns the rule off.
	MaxRun time.Duration
	// Redactor hides credentials in what the store keeps of n8n's text;
	// required (n8n.Redactor).
	Redactor audit.Redactor
	// Metrics, when set, counts what the store does and keeps its gauges
	// (outbox, review queue), read from the database in the background
	// every GaugeInterval (default 15s) whatever the scrape rate.
	Metrics       *metrics.Metrics
	GaugeInterval time.Duration
	// MaxConns is the PostgreSQL pool's size (default 20).
	MaxConns int
	// LockTimeout bounds every PostgreSQL statement's wait for a lock
	// (DefaultLockTimeout): past it, the request is answered 503 at once.
	LockTimeout time.Duration
	// Batching sets up group commit; its zero value batches with the
	// defaults.
	Batching Batching
	// SQLiteSyncNormal opens SQLite with synchronous=NORMAL instead of
	// FULL: faster, but a commit already answered may be lost on an OS
	// crash or power loss.
	SQLiteSyncNormal bool
	Now              func() time.Time
	Logger           *slog.Logger
}

// The defaults of the settings that bound a request's waits.
const (
	// DefaultLockTimeout is how long a PostgreSQL statement waits for a
	// row another session holds (Options.LockTimeout).
	DefaultLockTimeout = 2 * time.Second
	// DefaultQueueWait is how long a claim or an outcome report waits to
	// start (Batching.Wait).
	DefaultQueueWait = 500 * time.Millisecond
	// DefaultMaxRun is Options.MaxRun's default.
	DefaultMaxRun = 24 * time.Hour
)

// Store is the ledger and everything kept beside it. It is safe for
// concurrent use; every public method that writes opens its own transaction.
type Store struct {
	db          *sqlx.DB
	drv         driver.Driver
	q           queries
	where       string // the database, for messages, without credentials
	reviewAfter time.Duration
	alertRepeat time.Duration
	maxRun      time.Duration
	lockTimeout time.Duration // how long a request alone waits for a row another session holds
	lookup      audit.ExecutionLookup
	redact      audit.Redactor
	metrics     *metrics.Metrics
	now         func() time.Time
	log         *slog.Logger
	unlock      io.Closer
	wake        chan struct{}
	// stmts caches prepared statements by query: parsing is a third of
	// SQLite's work on the claim path and a round trip on PostgreSQL.
	stmts     sync.Map // string → *sqlx.Stmt
	preparing sync.Map // string → true while a background prepare runs
	compiledQ sync.Map // string → compiled: named statements, compiled once
	// txSetup begins every write transaction when the connections are a
	// transaction pooler's (driver.Pooled), which keep no session: then
	// nothing is prepared either.
	txSetup string
	// lastCommit is when a transaction last committed, lastDown when the
	// database last failed to answer (UnixNano): see answered.
	lastCommit, lastDown atomic.Int64
	shards               sync.Map // *sqlx.Tx → its counter shard, while it runs
	bg                   sync.WaitGroup
	closing              context.Context
	close                context.CancelFunc
	// writer admits one write transaction at a time on SQLite, which has
	// one writer anyway: waiting here respects the request's deadline,
	// waiting in SQLite's busy handler sleeps.
	writer chan struct{}
	// claims commits concurrent claims together (one at a time when
	// batching is off); nil only while Open runs.
	claims   *batcher[*request, answer]
	outcomes *batcher[*request, answer]
	errors   *batcher[*request, answer]
	busy     *busyKeys       // the entries the batches are deciding
	gauges   *storeCollector // nil without metrics
}

// Open connects to the database that opts names. It does not migrate: call
// Migrate, or check SchemaCurrent, before serving.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Redactor == nil {
		return nil, errors.New("audit: Options.Redactor is required: text from n8n can carry credentials")
	}
	drv, dsn, where, err := pickDriver(opts)
	if err != nil {
		return nil, err
	}
	q, err := loadQueries(drv.Queries())
	if err != nil {
		return nil, err
	}
	s := &Store{
		drv:         drv,
		q:           q,
		where:       where,
		reviewAfter: opts.ReviewAfter,
		alertRepeat: cmp.Or(opts.AlertRepeat, DefaultAlertRepeat),
		maxRun:      cmp.Or(opts.MaxRun, DefaultMaxRun),
		lockTimeout: cmp.Or(opts.LockTimeout, DefaultLockTimeout),
		lookup:      opts.Lookup,
		redact:      opts.Redactor,
		metrics:     opts.Metrics,
		now:         opts.Now,
		log:         opts.Logger,
		wake:        make(chan struct{}, 1),
	}
	s.closing, s.close = context.WithCancel(context.Background())
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.reviewAfter <= 0 {
		s.reviewAfter = 15 * time.Minute
	}
	if opts.Exclusive {
		if s.unlock, err = drv.Exclusive(where); err != nil {
			return nil, err
		}
	}
	dopts := driver.Options{MaxConns: opts.MaxConns, LockTimeout: cmp.Or(opts.LockTimeout, DefaultLockTimeout)}
	s.db, err = drv.Open(dsn, dopts)
	if err != nil {
		s.closeLock()
		return nil, fmt.Errorf("audit: open %s: %w", where, err)
	}
	if p, ok := drv.(driver.Pooled); ok {
		s.txSetup = p.TxSetup(dopts)
	}
	if drv.OneWriter() {
		s.writer = make(chan struct{}, 1)
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.watch(s.metrics, cmp.Or(opts.GaugeInterval, 15*time.Second))
	s.startBatching(opts.Batching, cmp.Or(opts.MaxConns, 20))
	return s, nil
}

// startBatching starts the group commit of claims, outcomes and error
// reports. Off, every request is a batch of one, decided by the same code
// as in a batch; as many run at once as half the pool serves (conns).
func (s *Store) startBatching(b Batching, conns int) {
	if b.Off {
		b.MaxBatch = 1
	}
	b.MaxBatch = cmp.Or(b.MaxBatch, 128)
	b.Queue = cmp.Or(b.Queue, 4096)
	b.Wait = cmp.Or(b.Wait, DefaultQueueWait)
	if b.Workers <= 0 {
		switch {
		case s.writer != nil:
			b.Workers = 1 // SQLite has one writer
		case b.Off:
			b.Workers = max(2, conns/2)
		default:
			b.Workers = 2
		}
	}
	s.busy = &busyKeys{busy: map[audit.EventKey]chan struct{}{}}
	s.claims = s.ledgerBatcher("claims", b)
	s.outcomes = s.ledgerBatcher("outcomes", b)
	s.errors = s.ledgerBatcher("errors", b)
}

// ledgerBatcher is a group commit of requests that the ledger decides
// (decide), the ones of entries another session holds set aside.
func (s *Store) ledgerBatcher(name string, cfg Batching) *batcher[*request, answer] {
	var b *batcher[*request, answer]
	b = newBatcher(s, name, cfg, func(ctx context.Context, tx *sqlx.Tx, jobs []*ledgerJob, now time.Time) error {
		return s.decide(ctx, tx, jobs, now, b.setAside)
	})
	b.key = func(r *request) audit.EventKey { return r.key() }
	return b
}

// Close closes the database and releases the SQLite lock.
func (s *Store) Close() error {
	s.close()
	if s.claims != nil { // nil when Open failed before batching started
		s.claims.stop()
		s.outcomes.stop()
		s.errors.stop()
	}
	s.bg.Wait()
	s.stmts.Range(func(_, v any) bool {
		v.(*sqlx.Stmt).Close()
		return true
	})
	err := s.db.Close()
	s.closeLock()
	return err
}

func (s *Store) closeLock() {
	if s.unlock != nil {
		s.unlock.Close()
		s.unlock = nil
	}
}

// Dialect returns "postgres" or "sqlite".
func (s *Store) Dialect() string { return s.drv.Name() }

// Where names the database for people: a file path or a URL without its
// password.
func (s *Store) Where() string { return s.where }

// DB returns the connection pool, for tests and for the self-check.
func (s *Store) DB() *sqlx.DB { return s.db }

// Wakeups delivers a value after a commit that wrote to the outbox, so that
// the worker sends without waiting for its next poll.
func (s *Store) Wakeups() <-chan struct{} { return s.wake }

func (s *Store) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.db.PingContext(ctx); err != nil {
		return s.dbError("ping "+s.where, err)
	}
	return nil
}

func (s *Store) migrator() (*goose.Provider, error) {
	fsys, err := migrations.FS(s.drv.Name())
	if err != nil {
		return nil, fmt.Errorf("audit: migrations: %w", err)
	}
	dialect, opts, err := s.drv.Migrations()
	if err != nil {
		return nil, err
	}
	opts = append(opts, goose.WithTableName("retryaudit_schema_version"))
	return goose.NewProvider(dialect, s.db.DB, fsys, opts...)
}

// Migrate applies the migrations that have not run yet.
func (s *Store) Migrate(ctx context.Context) error {
	p, err := s.migrator()
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return s.dbError("migrate "+s.where, err)
	}
	for _, r := range results {
		s.log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration)
	}
	s.RefreshGauges(ctx) // the first reading, now that the tables exist
	return nil
}

// SchemaCurrent reports whether every migration has been applied.
func (s *Store) SchemaCurrent(ctx context.Context) (bool, error) {
	p, err := s.migrator()
	if err != nil {
		return false, err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return false, s.dbError("read schema version", err)
	}
	return !pending, nil
}

// prepared returns query prepared once for the pool and bound to q when q
// is a transaction (database/sql prepares it once per connection). Inside a
// transaction a statement not prepared yet is prepared in the background and
// nil is returned: preparing on the pool would wait for a connection while
// holding one, and with every connection in a transaction that waits forever.
// Behind a transaction pooler nothing is prepared: a prepared statement
// lives in one server connection, and the next transaction may get another.
func (s *Store) prepared(q any, query string) *sqlx.Stmt {
	if s.txSetup != "" {
		return nil
	}
	tx, inTx := q.(*sqlx.Tx)
	if v, ok := s.stmts.Load(query); ok {
		if inTx {
			return tx.Stmtx(v.(*sqlx.Stmt))
		}
		return v.(*sqlx.Stmt)
	}
	if inTx {
		if _, busy := s.preparing.LoadOrStore(query, true); !busy {
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				s.prepare(query)
			}()
		}
		return nil
	}
	return s.prepare(query)
}

func (s *Store) prepare(query string) *sqlx.Stmt {
	ctx, cancel := context.WithTimeout(s.closing, 10*time.Second)
	defer cancel()
	st, err := s.db.PreparexContext(ctx, query)
	if err != nil {
		s.preparing.Delete(query)
		return nil // run unprepared: the query reports the error itself
	}
	if v, loaded := s.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		return v.(*sqlx.Stmt)
	}
	return st
}
