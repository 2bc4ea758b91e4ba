package notify

import "time"

// An expected outage — the database, Slack — is logged at WARN once when it
// starts and at INFO once when it ends, by whichever worker of the instance
// sees it first: the attempts in between are counted, not logged (they are
// at debug). The workers share the state through their Once.

// outageState is what Once keeps of one outage.
type outageState struct {
	down        bool
	failures    int
	lastFailure time.Time
}

// Down notes a failure of what (the database, Slack); it reports whether
// what was up until now, which the caller logs.
func (o *Once) Down(what string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outages == nil {
		o.outages = map[string]*outageState{}
	}
	s := o.outages[what]
	if s == nil {
		s = &outageState{}
		o.outages[what] = s
	}
	s.failures++
	s.lastFailure = time.Now()
	first := !s.down
	s.down = true
	return first
}

// Up notes a success of what; it reports whether what was down until now
// and has not failed for settle, with the failures counted meanwhile, which
// the caller logs. A success soon after a failure may be partial (a worker
// that found nothing to write while writes fail): the outage ends only when
// the failures have stopped.
func (o *Once) Up(what string, settle time.Duration) (bool, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.outages[what]
	if s == nil || !s.down || time.Since(s.lastFailure) < settle {
		return false, 0
	}
	n := s.failures
	s.down, s.failures = false, 0
	return true, n
}

// The outages the outbox tells apart.
const (
	outageDatabase = "database"
	outageSlack    = "Slack"
)

// databaseFailed logs the start of a database outage, once.
func (w *Worker) databaseFailed(doing string, err error) {
	w.defaults()
	if w.logged().Down(outageDatabase) {
		w.Log.Warn("outbox: the database does not answer; alerts wait in the outbox (logged again when it answers)",
			"doing", doing, "err", err)
		return
	}
	w.Log.Debug("outbox: the database does not answer", "doing", doing, "err", err)
}

// databaseAnswered logs the end of a database outage, once.
func (w *Worker) databaseAnswered() {
	if up, n := w.logged().Up(outageDatabase, w.settle()); up {
		w.Log.Info("outbox: the database answers again", "failures", n)
	}
}

// slackFailed logs the start of a Slack outage (a transport error or a 5xx,
// not a rate limit), once.
func (w *Worker) slackFailed(row int64, err error) {
	if w.logged().Down(outageSlack) {
		w.Log.Warn("outbox: Slack does not answer; alerts wait and are sent again with backoff (logged again when it answers)",
			"destination", w.Notifier.Name(), "row", row, "err", err)
	}
}

// slackAnswered logs the end of a Slack outage, once.
func (w *Worker) slackAnswered() {
	if up, n := w.logged().Up(outageSlack, 0); up {
		w.Log.Info("outbox: Slack answers again", "destination", w.Notifier.Name(), "failures", n)
	}
}

func (w *Worker) logged() *Once {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Logged
}

// settle is how long the database must go without a failure for its outage
// to end: a few polls, in which every worker has tried.
func (w *Worker) settle() time.Duration { return 5 * w.Poll }
