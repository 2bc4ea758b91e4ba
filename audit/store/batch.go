package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// Group commit. Concurrent requests of one kind (claims, outcomes) wait in a
// bounded queue; a worker takes everything that has arrived, up to a batch,
// and runs it as one transaction: one commit, one fsync, and set-based
// statements over the whole batch. There is no timer: a lone request goes at
// once, and while one batch commits the next collects. A batch keeps the
// order of arrival: a second request for a key is decided after the first,
// seeing what the first did, exactly as one by one.

// Batching sets the group commit up; zero values take the defaults.
type Batching struct {
	Off      bool          // run every request in its own transaction: a batch of one
	MaxBatch int           // requests per transaction (default 128)
	Queue    int           // requests that may wait (default 4096): past it, 503 at once
	Wait     time.Duration // the longest a request waits to start (DefaultQueueWait): past it, 503
	Workers  int           // batches in flight at once (default 2 on PostgreSQL, 1 on SQLite)
}

// job is one request in a batch.
type job[Req, Res any] struct {
	ctx    context.Context
	req    Req
	queued time.Time
	res    Res
	err    error
	after  func() // run after commit, for what the request set in motion (a wake-up)
	// relock: this run set the job aside, another database session holding
	// its entry's row (see setAside); lockedAt: when a run first did.
	relock   bool
	lockedAt time.Time
	// seq is the job's place in the order of arrival; released marks a
	// job its entry's set-aside queue let go (see aside).
	seq      uint64
	released bool
	done     chan struct{}
	state    atomic.Int32 // jobQueued, jobStarted, jobAbandoned
}

const (
	jobQueued int32 = iota
	jobStarted
	jobAbandoned
)

// batcher runs jobs of one kind in batches.
type batcher[Req, Res any] struct {
	s     *Store
	name  string
	cfg   Batching
	queue chan *job[Req, Res]
	// took is how long a full batch takes lately, in nanoseconds (a moving
	// average): what admission expects the queue ahead of a request to take.
	took atomic.Int64
	// run executes a batch in tx. It sets each job's res or err; an error
	// it returns fails the batch, which is then run again one by one.
	run func(ctx context.Context, tx *sqlx.Tx, jobs []*job[Req, Res], now time.Time) error
	// key names the entry a request is about, for Store.busy.
	key func(Req) audit.EventKey
	wg  sync.WaitGroup
	seq atomic.Uint64
	// aside holds, by entry, the jobs set aside for a row another session
	// locked, and every job of that entry that came after them: they go
	// on together, in the order they came (see setAside).
	mu    sync.Mutex
	aside map[audit.EventKey]*asideQueue[Req, Res]
}

// asideQueue is one entry's jobs set aside, in the order they came.
type asideQueue[Req, Res any] struct {
	jobs     []*job[Req, Res]
	inflight int  // jobs let go, not decided yet
	timer    bool // a pause is running before they go
}

func newBatcher[Req, Res any](s *Store, name string, cfg Batching,
	run func(context.Context, *sqlx.Tx, []*job[Req, Res], time.Time) error) *batcher[Req, Res] {
	b := &batcher[Req, Res]{s: s, name: name, cfg: cfg, queue: make(chan *job[Req, Res], cfg.Queue), run: run,
		aside: map[audit.EventKey]*asideQueue[Req, Res]{}}
	for i := 0; i < cfg.Workers; i++ {
		b.wg.Add(1)
		go b.work()
	}
	return b
}

// do queues a request and waits for its answer. A request that cannot be
// queued, or waits too long to start, is shed with ErrOverloaded; one whose
// caller gives up before it starts is never run.
func (b *batcher[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	j := &job[Req, Res]{ctx: ctx, req: req, queued: time.Now(), done: make(chan struct{}), seq: b.seq.Add(1)}
	closed := &audit.Error{Code: audit.CodeUnavailable, Message: b.name + ": the store is closed"}
	if b.s.closing.Err() != nil {
		return j.res, closed
	}
	if b.late() {
		b.s.metrics.Shed(b.name)
		return j.res, b.s.overloaded(b.name + ": the queue is longer than can start in time")
	}
	select {
	case b.queue <- j:
	default:
		b.s.metrics.Shed(b.name)
		return j.res, b.s.overloaded(b.name + ": the queue is full")
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return j.res, b.s.overloaded(b.name + ": waiting for a batch")
		}
		<-j.done // it runs now: its answer is the truth, give it
	case <-b.s.closing.Done():
		// No worker takes it any more (one that took it finishes it).
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return j.res, closed
		}
		<-j.done
	}
	if j.err == nil && j.after != nil {
		j.after()
	}
	return j.res, j.err
}

// late reports that the requests queued already would take longer than
// the admission wait to start: one more would wait in vain and, ahead of
// the others, make them late too. Shedding it at once keeps the queue to
// what can be served in time, so that under overload the batches are of
// requests still wanted (a queue that only sheds at its head serves
// none).
func (b *batcher[Req, Res]) late() bool {
	queued := len(b.queue)
	if queued < b.cfg.MaxBatch {
		return false
	}
	batches := (queued + b.cfg.MaxBatch - 1) / b.cfg.MaxBatch
	ahead := time.Duration(b.took.Load()) * time.Duration(batches) / time.Duration(b.cfg.Workers)
	return ahead > b.cfg.Wait
}

// learn folds how long a batch of n took into the moving average of a
// full batch's time (a batch's time grows with its size, less than in
// proportion: a smaller one says little, and is not taken as a full one).
func (b *batcher[Req, Res]) learn(n int, took time.Duration) {
	if n < b.cfg.MaxBatch/2 {
		return
	}
	old := time.Duration(b.took.Load())
	if old == 0 {
		b.took.Store(int64(took))
		return
	}
	b.took.Store(int64(old + (took-old)/5))
}

// work takes batches off the queue until the store closes.
func (b *batcher[Req, Res]) work() {
	defer b.wg.Done()
	for {
		var first *job[Req, Res]
		select {
		case first = <-b.queue:
		case <-b.s.closing.Done():
			return
		}
		batch := []*job[Req, Res]{first}
	fill:
		for len(batch) < b.cfg.MaxBatch {
			select {
			case j := <-b.queue:
				batch = append(batch, j)
			default:
				break fill
			}
		}
		b.execute(batch)
	}
}

// execute starts the jobs still wanted and runs them as one transaction; if
// the transaction fails (and certainly rolled back), each runs alone, so
// that one bad request cannot fail its neighbours.
func (b *batcher[Req, Res]) execute(batch []*job[Req, Res]) {
	now := time.Now()
	live := batch[:0]
	for _, j := range batch {
		switch {
		case !j.state.CompareAndSwap(jobQueued, jobStarted):
			b.settled(j)
			close(j.done) // abandoned by its caller
		case now.Sub(j.queued) > b.cfg.Wait && !j.released:
			b.s.metrics.Shed(b.name)
			j.err = b.s.overloaded(b.name + ": waited too long for a batch")
			close(j.done)
		default:
			live = append(live, j)
		}
	}
	if len(live) == 0 {
		return
	}
	release := b.s.busy.hold(b.s.closing, b.keys(live))
	// Past the hold, a batch of the same entries that set jobs aside has
	// queued them: these wait behind them.
	if live = b.behindAside(live); len(live) == 0 {
		release()
		return
	}
	err := b.inTx(live)
	if err == nil {
		b.learn(len(live), time.Since(now))
	}
	// A job is set aside only when the transaction that asked for it
	// committed. A commit whose answer was lost may have committed: its
	// jobs are not run again, each is answered unknown.
	if err != nil && len(live) > 1 && audit.ErrorCode(err) != audit.CodeUnknown {
		for _, j := range live {
			if e := b.inTx([]*job[Req, Res]{j}); e != nil {
				j.err, j.relock = e, false
			}
		}
	} else if err != nil {
		for _, j := range live {
			j.err, j.relock = err, false
		}
	}
	var relock, decided []*job[Req, Res]
	for _, j := range live {
		if j.relock {
			relock = append(relock, j)
		} else {
			decided = append(decided, j)
		}
	}
	b.putAside(relock) // before the hold ends, so that the next batch of the entry sees them
	release()
	b.s.metrics.Batched(b.name, len(live))
	for _, j := range decided {
		b.settled(j)
		close(j.done)
	}
}

// setAside takes out of a batch the jobs whose entry's row another
// database session holds (locked reports them), so that the batch never
// waits for it, and returns the others. A job set aside is queued again a
// little later (see later), to join another batch, until Batching.Wait
// after it was first set aside: the session may be one that commits at
// once (another instance's batch, an error recorded for the entry). Then
// it is answered that the row is locked (503 with Retry-After): the lock
// timeout is never waited for, and no worker waits at all.
func (b *batcher[Req, Res]) setAside(jobs []*job[Req, Res], locked func(Req) bool) []*job[Req, Res] {
	free := jobs[:0:0]
	now := time.Now()
	for _, j := range jobs {
		switch {
		case !locked(j.req):
			free = append(free, j)
		case j.lockedAt.IsZero():
			j.lockedAt, j.relock = now, true
		case now.Sub(j.lockedAt) >= b.cfg.Wait:
			j.err = &audit.Error{Code: audit.CodeBusy, Message: fmt.Sprintf("%s: not decided within %s", b.name, b.cfg.Wait),
				Err: audit.ErrLocked}
		default:
			j.relock = true
		}
	}
	return free
}

// behindAside takes out of a batch the jobs of entries that have jobs set
// aside, which wait behind them (in the order they came), and returns the
// others, and the jobs their queue let go, in the order they came.
func (b *batcher[Req, Res]) behindAside(batch []*job[Req, Res]) []*job[Req, Res] {
	if b.key == nil {
		return batch
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.aside) == 0 {
		return batch
	}
	out := batch[:0:0]
	for _, j := range batch {
		q := b.aside[b.key(j.req)]
		if q == nil || j.released {
			out = append(out, j)
			continue
		}
		if j.lockedAt.IsZero() {
			j.lockedAt = time.Now()
		}
		j.state.Store(jobQueued) // its caller may give up meanwhile
		q.jobs = insertBySeq(q.jobs, j)
	}
	return out
}

// putAside queues jobs set aside behind their entry's earlier jobs, and
// lets each entry's queue go again once a pause has passed: as long again
// as its oldest job has been set aside (5 ms at first), so that it is tried
// a few times, not in a loop, the last time when Batching.Wait is over.
func (b *batcher[Req, Res]) putAside(jobs []*job[Req, Res]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, j := range jobs {
		j.relock, j.released = false, false
		j.state.Store(jobQueued) // its caller may give up meanwhile
		k := b.key(j.req)
		q := b.aside[k]
		if q == nil {
			q = &asideQueue[Req, Res]{}
			b.aside[k] = q
		}
		q.jobs = insertBySeq(q.jobs, j)
		if q.inflight > 0 {
			q.inflight--
		}
		b.schedule(k, q)
	}
}

// settled notes that a job its entry's queue let go was decided; when the
// last one is, the jobs that waited behind them go at once.
func (b *batcher[Req, Res]) settled(j *job[Req, Res]) {
	if !j.released || b.key == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	j.released = false
	k := b.key(j.req)
	q := b.aside[k]
	if q == nil {
		return
	}
	q.inflight--
	b.schedule(k, q)
}

// schedule lets an entry's queue go after its pause, when none of its jobs
// is in flight; an empty queue is dropped. b.mu is held.
func (b *batcher[Req, Res]) schedule(k audit.EventKey, q *asideQueue[Req, Res]) {
	if q.inflight > 0 || q.timer {
		return
	}
	if len(q.jobs) == 0 {
		delete(b.aside, k)
		return
	}
	since := time.Since(q.jobs[0].lockedAt)
	pause := max(min(max(5*time.Millisecond, since), b.cfg.Wait-since), 0)
	q.timer = true
	time.AfterFunc(pause, func() {
		b.mu.Lock()
		jobs := q.jobs
		q.jobs, q.timer, q.inflight = nil, false, len(jobs)
		for _, j := range jobs {
			j.released, j.queued = true, time.Now()
		}
		b.mu.Unlock()
		// They run as one batch of their own, in the order they came (a
		// batch decides an entry's jobs in its order); Store.busy keeps it
		// from meeting the workers' batches of the same entry.
		b.execute(jobs)
	})
}

// insertBySeq inserts j into jobs, kept in the order of arrival.
func insertBySeq[Req, Res any](jobs []*job[Req, Res], j *job[Req, Res]) []*job[Req, Res] {
	i, _ := slices.BinarySearchFunc(jobs, j.seq, func(x *job[Req, Res], seq uint64) int { return cmp.Compare(x.seq, seq) })
	return slices.Insert(jobs, i, j)
}

// keys returns the entries of jobs, for Store.busy.
func (b *batcher[Req, Res]) keys(jobs []*job[Req, Res]) []audit.EventKey {
	if b.key == nil {
		return nil
	}
	keys := make([]audit.EventKey, len(jobs))
	for i, j := range jobs {
		keys[i] = b.key(j.req)
	}
	return keys
}

// busyKeys are the entries that batches of this process are deciding, their
// rows locked in their transactions. A batch with one of them waits, before
// it begins, for the batch that holds it (as it would for the row lock), so
// that a row a batch finds locked is always another session's: n8n's
// Postgres node, a psql, another instance.
type busyKeys struct {
	mu   sync.Mutex
	busy map[audit.EventKey]chan struct{} // closed when the batch holding the key ends
}

// hold waits until no batch holds any of keys and holds them until release
// is called. A store that closes stops the wait.
func (k *busyKeys) hold(ctx context.Context, keys []audit.EventKey) (release func()) {
	for {
		k.mu.Lock()
		var wait chan struct{}
		for _, key := range keys {
			if ch := k.busy[key]; ch != nil {
				wait = ch
				break
			}
		}
		if wait == nil {
			done := make(chan struct{})
			for _, key := range keys {
				k.busy[key] = done
			}
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				for _, key := range keys {
					if k.busy[key] == done {
						delete(k.busy, key)
					}
				}
				k.mu.Unlock()
				close(done)
			}
		}
		k.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return func() {}
		}
	}
}

// stop waits for the workers to finish their batches and answers what still
// waits: the store is closing.
func (b *batcher[Req, Res]) stop() {
	b.wg.Wait()
	for {
		select {
		case j := <-b.queue:
			if j.state.CompareAndSwap(jobQueued, jobStarted) {
				j.err = &audit.Error{Code: audit.CodeUnavailable, Message: b.name + ": the store is closing"}
			}
			close(j.done)
		default:
			return
		}
	}
}

// inTx runs jobs in one transaction on a context of their own: callers that
// gave up once their job started no longer decide whether it commits.
func (b *batcher[Req, Res]) inTx(jobs []*job[Req, Res]) error {
	ctx, cancel := context.WithTimeout(b.s.closing, 30*time.Second)
	defer cancel()
	return b.s.inTx(ctx, func(tx *sqlx.Tx) error {
		for _, j := range jobs {
			var zero Res
			j.res, j.err, j.after, j.relock = zero, nil, nil, false
		}
		return b.run(ctx, tx, jobs, b.s.now())
	})
}
