package notify_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/notify"
)

var links = audit.Links{
	BaseURL:      "https://retryaudit.example",
	N8NEditorURL: "https://n8n.example",
	CRM:          map[string]string{"shop": "https://crm.example.com/orders?external_id={event_id}"},
}

// movingClock runs at the speed of real time from a fixed start and can be
// moved forward: leases run out, slots pass and Retry-After ends as they
// would in production, and a test can still skip an hour.
type movingClock struct {
	mu     sync.Mutex
	start  time.Time
	real   time.Time
	offset time.Duration
}

func newMovingClock() *movingClock {
	return &movingClock{start: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), real: time.Now()}
}

func (c *movingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(time.Since(c.real) + c.offset)
}

func (c *movingClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is a store, a moving clock and a worker sending to a fake Slack.
type rig struct {
	store   *store.Store
	clock   *movingClock
	worker  *notify.Worker
	slack   *fakeSlack
	logs    *syncBuffer
	links   audit.Links
	timeout time.Duration // the Slack client's
}

func newRig(t *testing.T, dialect string, webhook bool) *rig {
	t.Helper()
	clock := newMovingClock()
	r := &rig{clock: clock, slack: newFakeSlack(t, clock.Now), logs: &syncBuffer{}, links: links, timeout: 5 * time.Second}
	r.store = audittest.Open(t, dialect, store.Options{Now: clock.Now})
	r.worker = r.newWorker(t, r.store, webhook, "worker-1")
	t.Cleanup(func() { checkNoSecrets(t, r) })
	return r
}

// instance opens one more store on the rig's database: another instance.
func (r *rig) instance(t *testing.T, url string) *store.Store {
	t.Helper()
	return audittest.OpenURL(t, store.Options{URL: url, Now: r.clock.Now})
}

// newRigURL is a rig on a database several stores share.
func newRigURL(t *testing.T, dialect string) (*rig, string) {
	t.Helper()
	clock := newMovingClock()
	url := audittest.URL(t, dialect)
	r := &rig{clock: clock, slack: newFakeSlack(t, clock.Now), logs: &syncBuffer{}, links: links, timeout: 5 * time.Second}
	r.store = r.instance(t, url)
	r.worker = r.newWorker(t, r.store, false, "worker-1")
	t.Cleanup(func() { checkNoSecrets(t, r) })
	return r, url
}

func (r *rig) newWorker(t *testing.T, s *store.Store, webhook bool, owner string) *notify.Worker {
	t.Helper()
	var n notify.Notifier = r.bot(botToken)
	if webhook {
		n = notify.NewWebhook(r.slack.webhookURL(), r.timeout)
	}
	return &notify.Worker{Store: s, Notifier: n, Renderer: notify.NewRenderer(r.links, r.clock.Now), Owner: owner,
		Now: r.clock.Now, Poll: 50 * time.Millisecond,
		Log:         slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BaseBackoff: time.Second, MaxBackoff: time.Minute, MinInterval: time.Millisecond}
}

func (r *rig) bot(token string) *notify.Bot {
	return notify.NewBot(notify.BotConfig{Token: token, Channel: "C0ALERTS", APIURL: r.slack.apiURL(), Timeout: r.timeout})
}

// checkNoSecrets fails the test if a token or webhook URL reached a log
// line or a stored error.
func checkNoSecrets(t *testing.T, r *rig) {
	t.Helper()
	var stored []string
	r.store.DB().Select(&stored, `SELECT last_error FROM outbox`)
	for _, text := range append(stored, r.logs.String()) {
		for _, secret := range []string{botToken, "SeCrEtWeBhOoKpAtH"} {
			if strings.Contains(text, secret) {
				t.Errorf("a secret reached the logs or the outbox: %s", text)
			}
		}
	}
}

func (r *rig) drain(t *testing.T) {
	t.Helper()
	if _, err := r.worker.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// unknown claims an event and reports its outcome unknown: the first alert.
func (r *rig) unknown(t *testing.T, event string) {
	t.Helper()
	unknownIn(t, r.store, event)
}

func unknownIn(t *testing.T, s *store.Store, event string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: "4711",
		WorkflowID: "wf1", WorkflowName: "Orders to CRM"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event,
		Outcome: audit.OutcomeUnknown, ExecutionID: "4711", Reason: "timeout after 30s <script>"}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) states(t *testing.T) map[string]int {
	t.Helper()
	var rows []struct {
		State string `db:"state"`
		N     int    `db:"n"`
	}
	if err := r.store.DB().Select(&rows, `SELECT state, count(*) AS n FROM outbox GROUP BY state`); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, row := range rows {
		out[row.State] = row.N
	}
	return out
}

// open counts the rows not finished yet.
func (r *rig) open(t *testing.T) int {
	t.Helper()
	st := r.states(t)
	return st["pending"] + st["sending"]
}

// drainUntil drains, moving the clock by step between drains, until no row
// is open or tries run out.
func (r *rig) drainUntil(t *testing.T, step time.Duration, tries int) {
	t.Helper()
	for i := 0; i < tries && r.open(t) > 0; i++ {
		r.drain(t)
		if r.open(t) > 0 {
			r.clock.Advance(step)
		}
	}
}

// unescapeJSON undoes the \u0026-style escapes of encoding/json, so that
// tests can look for URLs as people see them.
func unescapeJSON(s string) string {
	return strings.NewReplacer(`\u0026`, "&", `\u003c`, "<", `\u003e`, ">", `\n`, "\n").Replace(s)
}
