package digest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/digest"
	"github.com/retryaudit/retryaudit/notify"
)

const botToken = "xoxb-1-2-digest-token"

// fakeSlack keeps the messages posted; it can be down.
type fakeSlack struct {
	*httptest.Server
	mu    sync.Mutex
	posts []map[string]string
	down  bool
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/chat.postMessage") {
			f.posts = append(f.posts, map[string]string{"text": r.Form.Get("text"), "blocks": r.Form.Get("blocks")})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C0ALERTS", "ts": "1700000000.000100"})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSlack) sent() []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]string(nil), f.posts...)
}

func (f *fakeSlack) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func worker(s *store.Store, f *fakeSlack) *notify.Worker {
	bot := notify.NewBot(notify.BotConfig{Token: botToken, Channel: "C0ALERTS", APIURL: f.URL + "/api/",
		Timeout: 2 * time.Second})
	return &notify.Worker{Store: s, Notifier: bot, Owner: "w1", MinInterval: time.Millisecond, Poll: 50 * time.Millisecond,
		BaseBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Renderer: notify.NewRenderer(audit.Links{BaseURL: "https://retryaudit.example"}, nil)}
}

func maker(s *store.Store) *digest.Maker {
	// Tomorrow's digest, at midnight: it tells today.
	return &digest.Maker{Store: s, At: 0, TZ: time.UTC, Now: func() time.Time { return time.Now().Add(24 * time.Hour) }}
}

func digestRows(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.DB().Get(&n, `SELECT count(*) FROM outbox WHERE thread_key LIKE 'digest:%'`); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNothingToSayNothingSent(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := audittest.Open(t, dialect, store.Options{})
		f := newFakeSlack(t)
		m := maker(s)
		made, err := m.Tick(context.Background())
		if err != nil || !made {
			t.Fatalf("made %v, %v", made, err)
		}
		if n := digestRows(t, s); n != 0 {
			t.Fatalf("an empty day queued %d digests", n)
		}
		worker(s, f).Drain(context.Background())
		if len(f.sent()) != 0 {
			t.Fatalf("an empty digest was sent: %v", f.sent())
		}
		if made, err := m.Tick(context.Background()); err != nil || made {
			t.Fatalf("the second tick of the day made it again: %v, %v", made, err)
		}
	})
}

func TestDigestSaysWhatHappenedOnceThroughAnOutage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := audittest.Open(t, dialect, store.Options{})
		ctx := context.Background()
		claim := func(event, exec string) {
			t.Helper()
			if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: exec, WorkflowID: "wf1"}); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range []string{"ord-1", "ord-2", "ord-3"} {
			claim(e, "x-"+e)
		}
		if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "ord-1", Outcome: audit.OutcomeDone,
			ExecutionID: "x-ord-1"}); err != nil {
			t.Fatal(err)
		}
		claim("ord-1", "x-again") // the sender delivers again: stopped
		if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "ord-2", Outcome: audit.OutcomeUnknown,
			ExecutionID: "x-ord-2", Reason: "timeout"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorReconcile, DedupeKey: "exec:999",
			ExecutionID: "999", WorkflowID: "wf9", Message: "failed, no error workflow"}); err != nil {
			t.Fatal(err)
		}

		f := newFakeSlack(t)
		f.setDown(true)
		w := worker(s, f)
		drainDown := func() {
			dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			w.Drain(dctx)
		}
		drainDown() // the unknown outcome's alert waits in the outbox too
		made, err := maker(s).Tick(ctx)
		if err != nil || !made {
			t.Fatalf("made %v, %v", made, err)
		}
		drainDown()
		if n := digestRows(t, s); n != 1 {
			t.Fatalf("%d digests queued, want 1", n)
		}
		f.setDown(false)
		deadline := time.Now().Add(10 * time.Second)
		var digest map[string]string
		for digest == nil && time.Now().Before(deadline) {
			w.Drain(ctx)
			for _, p := range f.sent() {
				if strings.Contains(p["text"], "daily digest") {
					digest = p
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if digest == nil {
			t.Fatal("the digest was never sent after the outage")
		}
		for _, want := range []string{"*3* new events", "*1* duplicate stopped",
			"*1* failure that reached no error workflow", "*1 waiting for a person*",
			"https://retryaudit.example/events/shop/ord-2", "Review queue"} {
			if !strings.Contains(digest["blocks"], want) {
				t.Errorf("the digest does not say %q:\n%s", want, digest["blocks"])
			}
		}
		w.Drain(ctx)
		n := 0
		for _, p := range f.sent() {
			if strings.Contains(p["text"], "daily digest") {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the digest was sent %d times", n)
		}
	})
}

func TestTwoInstancesMakeOneDigest(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		url := audittest.URL(t, dialect)
		a := audittest.OpenURL(t, store.Options{URL: url})
		if _, err := a.Claim(context.Background(), audit.ClaimRequest{Source: "shop", EventID: "ord-1",
			ExecutionID: "1", WorkflowID: "wf1"}); err != nil {
			t.Fatal(err)
		}
		b := a
		if dialect == "postgres" {
			b = audittest.OpenURL(t, store.Options{URL: url})
		}
		var wg sync.WaitGroup
		made := make([]bool, 8)
		for i := range made {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				made[i], err = maker(s).Tick(context.Background())
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		n := 0
		for _, m := range made {
			if m {
				n++
			}
		}
		if n != 1 || digestRows(t, a) != 1 {
			t.Fatalf("%d ticks made the digest, %d rows queued; want 1 and 1", n, digestRows(t, a))
		}
	})
}

func TestNotBeforeItsTime(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := audittest.Open(t, dialect, store.Options{})
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Skip("no time zone data")
		}
		now := time.Date(2026, 12, 6, 7, 29, 0, 0, berlin)
		m := &digest.Maker{Store: s, At: 7*time.Hour + 30*time.Minute, TZ: berlin, Now: func() time.Time { return now }}
		if made, err := m.Tick(context.Background()); err != nil || made {
			t.Fatalf("a minute early: made %v, %v", made, err)
		}
		now = now.Add(time.Minute)
		if made, err := m.Tick(context.Background()); err != nil || !made {
			t.Fatalf("on time: made %v, %v", made, err)
		}
		var day string
		if err := s.DB().Get(&day, `SELECT day FROM slack_digests`); err != nil || day != "2026-12-06" {
			t.Fatalf("recorded day %q, %v", day, err)
		}
	})
}

func TestOldDigestsAreForgotten(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := audittest.Open(t, dialect, store.Options{})
		ctx := context.Background()
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "ord-1", ExecutionID: "1", WorkflowID: "wf1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().Exec(`INSERT INTO slack_digests (day) VALUES ('2020-01-01')`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().Exec(`INSERT INTO outbox (thread_key, kind, payload, state) VALUES ('digest:2020-01-01', 'digest', '{}', 'sent')`); err != nil {
			t.Fatal(err)
		}
		if made, err := maker(s).Tick(ctx); err != nil || !made {
			t.Fatalf("made %v, %v", made, err)
		}
		var days []string
		s.DB().Select(&days, `SELECT day FROM slack_digests ORDER BY day`)
		if len(days) != 1 || days[0] == "2020-01-01" || digestRows(t, s) != 1 {
			t.Fatalf("days %v, %d digest rows: the old day should be forgotten, today's kept", days, digestRows(t, s))
		}
	})
}
