package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/notify"
)

// TestOutagesAreLoggedOnce: while Slack answers 503, and while the database
// refuses the outbox's writes (a trigger raising a disk's error), two
// workers of one instance try again and again; each outage is one WARN line
// when it starts and one INFO line when it ends, no ERROR (before, a
// database outage was a WARN per poll and worker, and Slack being down was
// nowhere above debug).
func TestOutagesAreLoggedOnce(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		logged := &notify.Once{}
		w1, w2 := r.worker, r.newWorker(t, r.store, false, "worker-2")
		for _, w := range []*notify.Worker{w1, w2} {
			w.Logged, w.Poll, w.BaseBackoff = logged, 20*time.Millisecond, 10*time.Millisecond
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		for _, w := range []*notify.Worker{w1, w2} {
			go func() { w.Run(ctx); done <- struct{}{} }()
		}
		defer func() { cancel(); <-done; <-done }()
		within := func(what string, cond func() bool) {
			t.Helper()
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if cond() {
					return
				}
			}
			t.Fatalf("%s: not within 10 s", what)
		}

		r.slack.setFail(func(c call) (int, map[string]string, string) {
			return 503, nil, `{"ok":false,"error":"service_unavailable"}`
		})
		for _, ev := range []string{"out-1", "out-2", "out-3"} {
			r.unknown(t, ev)
		}
		within("several attempts against Slack", func() bool { return len(r.slack.all()) >= 10 })
		r.slack.setFail(nil)
		within("every alert sent once Slack answers", func() bool { return r.states(t)["sent"] == 3 })

		restore := failOutboxWrites(t, r)
		r.unknown(t, "out-4")
		time.Sleep(500 * time.Millisecond) // 25 polls of each worker, all failing
		restore()
		within("the alert sent once the database answers", func() bool { return r.states(t)["sent"] == 4 })
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end) &&
			!strings.Contains(r.logs.String(), "the database answers again"); {
			time.Sleep(20 * time.Millisecond) // the end of the outage logged (checked below)
		}

		logs := r.logs.String()
		for _, want := range []struct {
			line string
			n    int
		}{
			{"level=WARN msg=\"outbox: Slack does not answer", 1},
			{"level=INFO msg=\"outbox: Slack answers again\"", 1},
			{"level=WARN msg=\"outbox: the database does not answer", 1},
			{"level=INFO msg=\"outbox: the database answers again\"", 1},
			{"level=ERROR", 0},
		} {
			if n := strings.Count(logs, want.line); n != want.n {
				t.Errorf("%d lines %s, want %d", n, want.line, want.n)
			}
		}
		if t.Failed() {
			t.Logf("the log:\n%s", grepLevels(logs))
		}
	})
}

// failOutboxWrites makes every write of the outbox table fail until the
// returned function is called.
func failOutboxWrites(t *testing.T, r *rig) func() {
	t.Helper()
	db := r.store.DB()
	set, unset := []string{
		`CREATE TRIGGER ra_test_fail_update BEFORE UPDATE ON outbox BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`,
	}, []string{`DROP TRIGGER ra_test_fail_update`}
	if r.store.Dialect() == "postgres" {
		set = []string{
			`CREATE FUNCTION ra_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			   RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; END $$`,
			`CREATE TRIGGER ra_test_fail BEFORE UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION ra_test_fail()`,
		}
		unset = []string{`DROP TRIGGER ra_test_fail ON outbox`, `DROP FUNCTION ra_test_fail()`}
	}
	for _, q := range set {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return func() {
		for _, q := range unset {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
}

// grepLevels keeps the log's lines above debug.
func grepLevels(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, "level=DEBUG") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
