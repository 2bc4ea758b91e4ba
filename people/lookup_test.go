package people_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/people"
)

// fakeCRM answers /orders?ref=<event_id> the way each test event asks.
func fakeCRM(t *testing.T, elsewhere string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer crm-secret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		switch ev := r.URL.Query().Get("ref"); ev {
		case "found":
			w.Write([]byte(`{"data":[{"id":12345678901234567890,"reference":"CRM-123"}]}`))
		case "found/with slash":
			w.Write([]byte(`{"data":[{"reference":"CRM-9"}]}`))
		case "empty":
			w.Write([]byte(`{"data":[]}`))
		case "gone":
			http.NotFound(w, r)
		case "null-item":
			w.Write([]byte(`{"data":[null]}`))
		case "other-shape":
			w.Write([]byte(`{"items":[]}`))
		case "null-data":
			w.Write([]byte(`{"data":null}`))
		case "a-string":
			w.Write([]byte(`"no such route"`))
		case "slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
			w.Write([]byte(`{"data":[{"reference":"late"}]}`))
		case "huge":
			w.Write([]byte(`{"data":[{"reference":"` + strings.Repeat("x", 2<<20) + `"}]}`))
		case "redirect":
			http.Redirect(w, r, elsewhere+"/steal", http.StatusFound)
		case "leaky":
			w.Write([]byte(`{"data":[{"reference":"Authorization: Bearer sk_live_abcdefghijklmnopqrstuvwxyz0123"}]}`))
		default:
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func claim(t *testing.T, st *store.Store, ev string) {
	t.Helper()
	if _, err := st.Claim(context.Background(), audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: "1",
		WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
}

func TestLookup(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		st := audittest.Open(t, dialect, store.Options{})
		stolen := make(chan string, 1)
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			stolen <- r.Header.Get("Authorization")
		}))
		t.Cleanup(other.Close)
		crm := fakeCRM(t, other.URL)
		l, err := people.NewLookups(st, audit.Links{CRM: map[string]string{"shop": "https://crm.example/o/{crm_ref}"}},
			n8n.Redactor{}, nil, []people.LookupConfig{{Source: "shop", URL: crm.URL + "/orders?ref={event_id}",
				Token: "crm-secret", Found: "data.0", Ref: "data.0.reference", Timeout: time.Second, MaxBody: 64 << 10}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		who := people.Who{Name: "alice", Via: audit.ViaPage}
		for _, tc := range []struct {
			name, event, outcome, ref, message string
		}{
			{"a found order gives its reference and link", "found", audit.LookupFound, "CRM-123", ""},
			{"an event id is escaped into the query", "found/with slash", audit.LookupFound, "CRM-9", ""},
			{"an empty list is not found", "empty", audit.LookupNotFound, "", "empty at data.0"},
			{"a null item is not found", "null-item", audit.LookupNotFound, "", "empty at data.0"},
			{"a 404 is an error: the URL may be wrong", "gone", audit.LookupError, "", "HTTP 404, which is not taken as"},
			{"another shape is an error, not not found", "other-shape", audit.LookupError, "",
				`the answer has no data: its shape is not what FOUND (data.0) names: no "data" at the top`},
			{"a null parent is an error", "null-data", audit.LookupError, "", "data is null, not an object or an array"},
			{"a bare string is an error", "a-string", audit.LookupError, "", "the top is a string"},
			{"a slow CRM times out", "slow", audit.LookupError, "", "did not answer within 1s"},
			{"a huge answer is cut and said so", "huge", audit.LookupError, "", "is over 65536 bytes"},
			{"a redirect to another host is refused", "redirect", audit.LookupError, "", "redirected to another address"},
			{"a 500 is an error", "broken", audit.LookupError, "", "HTTP 500: boom"},
			{"the answer is redacted", "leaky", audit.LookupFound, "Authorization: Bearer", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				claim(t, st, tc.event)
				before, err := st.Event(ctx, "shop", tc.event)
				if err != nil {
					t.Fatal(err)
				}
				res, err := l.Run(ctx, audit.EventKey{Source: "shop", EventID: tc.event}, who)
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome != tc.outcome || !strings.HasPrefix(res.CRMRef, tc.ref) || !strings.Contains(res.Message, tc.message) {
					t.Fatalf("got %s %q %q, want %s %q %q", res.Outcome, res.CRMRef, res.Message, tc.outcome, tc.ref, tc.message)
				}
				if strings.Contains(res.CRMRef+res.Message, "sk_live") {
					t.Fatalf("a secret got through: %q %q", res.CRMRef, res.Message)
				}
				if tc.event == "found" && res.Link != "https://crm.example/o/CRM-123" {
					t.Errorf("link %q", res.Link)
				}
				after, err := st.Event(ctx, "shop", tc.event)
				if err != nil {
					t.Fatal(err)
				}
				if after.Version != before.Version || after.Status != before.Status {
					t.Errorf("the lookup moved the entry: version %d → %d", before.Version, after.Version)
				}
				latest, ok, err := l.Latest(ctx, audit.EventKey{Source: "shop", EventID: tc.event}, "")
				if err != nil || !ok {
					t.Fatalf("latest: %v %v", ok, err)
				}
				if latest.Outcome != res.Outcome || latest.CRMRef != res.CRMRef || latest.Actor != "alice" ||
					latest.Via != audit.ViaPage || latest.Version != before.Version {
					t.Errorf("latest %+v, want %+v", latest, res)
				}
			})
		}
		select {
		case h := <-stolen:
			t.Errorf("the other host was called (Authorization %q)", h)
		default:
		}
		t.Run("a 404 is not found where NOT_FOUND_STATUS says so", func(t *testing.T) {
			l404, err := people.NewLookups(st, audit.Links{}, n8n.Redactor{}, nil, []people.LookupConfig{{Source: "shop",
				URL: crm.URL + "/orders?ref={event_id}", Token: "crm-secret", Found: "data.0", Ref: "data.0.reference",
				NotFoundStatus: 404}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := l404.Run(ctx, audit.EventKey{Source: "shop", EventID: "gone"}, who)
			if err != nil || res.Outcome != audit.LookupNotFound || !strings.Contains(res.Message, "NOT_FOUND_STATUS") {
				t.Fatalf("%+v %v", res, err)
			}
		})
		t.Run("FOUND inside a list's item: an empty list is an error", func(t *testing.T) {
			deep, err := people.NewLookups(st, audit.Links{}, n8n.Redactor{}, nil, []people.LookupConfig{{Source: "shop",
				URL: crm.URL + "/orders?ref={event_id}", Token: "crm-secret", Ref: "data.0.reference"}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := deep.Run(ctx, audit.EventKey{Source: "shop", EventID: "empty"}, who)
			if err != nil || res.Outcome != audit.LookupError || !strings.Contains(res.Message, "the array at data has no item 0") {
				t.Fatalf("%+v %v", res, err)
			}
		})
		t.Run("an entry that moves while the CRM answers: an error, never its not found", func(t *testing.T) {
			claim(t, st, "moving")
			crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The holder reports meanwhile (it may have made the order).
				if _, err := st.ReportOutcome(r.Context(), audit.OutcomeRequest{Source: "shop", EventID: "moving",
					Outcome: audit.OutcomeUnknown, ExecutionID: "1", WorkflowID: "wf"}); err != nil {
					t.Error(err)
				}
				w.Write([]byte(`{"data":[]}`))
			}))
			t.Cleanup(crm.Close)
			moving, err := people.NewLookups(st, audit.Links{}, n8n.Redactor{}, nil, []people.LookupConfig{{Source: "shop",
				URL: crm.URL + "/orders?ref={event_id}", Found: "data.0", Ref: "data.0.reference"}})
			if err != nil {
				t.Fatal(err)
			}
			key := audit.EventKey{Source: "shop", EventID: "moving"}
			res, err := moving.Run(ctx, key, who)
			if err != nil || res.Outcome != audit.LookupError || !strings.Contains(res.Message, "changed while the CRM was asked") {
				t.Fatalf("%+v %v", res, err)
			}
			latest, _, err := moving.Latest(ctx, key, "")
			if err != nil || latest.Outcome != audit.LookupError || latest.Message != res.Message {
				t.Fatalf("recorded %+v %v", latest, err)
			}
		})
		t.Run("an unknown event is not looked up", func(t *testing.T) {
			_, err := l.Run(ctx, audit.EventKey{Source: "shop", EventID: "nope"}, who)
			if audit.ErrorCode(err) != audit.CodeNotFound {
				t.Fatalf("got %v", err)
			}
		})
		t.Run("a source without a lookup is refused", func(t *testing.T) {
			_, err := l.Run(ctx, audit.EventKey{Source: "other", EventID: "found"}, who)
			if audit.ErrorCode(err) != audit.CodeInvalid {
				t.Fatalf("got %v", err)
			}
		})
	})
}

func TestLookupConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   people.LookupConfig
		field string
	}{
		{"a placeholder in the host", people.LookupConfig{URL: "https://{source}.crm.example/o", Ref: "id"}, "URL"},
		{"a placeholder after the host", people.LookupConfig{URL: "https://crm.example{crm_ref}/o", Ref: "id"}, "URL"},
		{"an unknown placeholder", people.LookupConfig{URL: "https://crm.example/o/{order}", Ref: "id"}, "URL"},
		{"not http", people.LookupConfig{URL: "ftp://crm.example/o", Ref: "id"}, "URL"},
		{"credentials in the URL", people.LookupConfig{URL: "https://u:p@crm.example/o", Ref: "id"}, "URL"},
		{"a method other than GET or POST", people.LookupConfig{URL: "https://crm.example/o", Method: "DELETE", Ref: "id"}, "METHOD"},
		{"no reference path", people.LookupConfig{URL: "https://crm.example/o"}, "REF"},
		{"a bad path", people.LookupConfig{URL: "https://crm.example/o", Ref: "data..id"}, "REF"},
		{"a timeout too long", people.LookupConfig{URL: "https://crm.example/o", Ref: "id", Timeout: time.Hour}, "TIMEOUT"},
		{"a body without POST", people.LookupConfig{URL: "https://crm.example/o", Ref: "id", Body: "{}"}, "BODY"},
		{"a not-found status other than 404 or 410", people.LookupConfig{URL: "https://crm.example/o", Ref: "id",
			NotFoundStatus: 500}, "NOT_FOUND_STATUS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if field, err := tc.cfg.Check(); err == nil || field != tc.field {
				t.Fatalf("field %q err %v, want %s refused", field, err, tc.field)
			}
		})
	}
}

func TestLookupPOST(t *testing.T) {
	st := audittest.Open(t, "sqlite", store.Options{})
	got := make(chan string, 1)
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 1024)
		n, _ := r.Body.Read(body)
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("X-Api-Key") + " " + r.Header.Get("X-Tenant") + " " +
			r.Header.Get("Content-Type") + " " + string(body[:n])
		w.Write([]byte(`{"total":1,"items":[{"ref":4711}]}`))
	}))
	t.Cleanup(crm.Close)
	l, err := people.NewLookups(st, audit.Links{}, n8n.Redactor{}, nil, []people.LookupConfig{{Source: "shop",
		URL: crm.URL + "/search/{source}", Method: "post", Body: `{"external_id":"{source}:{event_id}"}`,
		Token: "k", TokenHeader: "X-Api-Key", Headers: map[string]string{"X-Tenant": "eu"}, Found: "total",
		Ref: "items.0.ref"}})
	if err != nil {
		t.Fatal(err)
	}
	claim(t, st, `say "hi"\`)
	res, err := l.Run(context.Background(), audit.EventKey{Source: "shop", EventID: `say "hi"\`},
		people.Who{Name: "bob", Via: audit.ViaSlack})
	if err != nil || res.Outcome != audit.LookupFound || res.CRMRef != "4711" || res.Via != audit.ViaSlack {
		t.Fatalf("%+v %v", res, err)
	}
	want := `POST /search/shop k eu application/json {"external_id":"shop:say \"hi\"\\"}`
	if g := <-got; g != want {
		t.Errorf("the CRM got %s\nwant %s", g, want)
	}
}

// TestLookupsAtOnce: one CRM host gets MaxLookupsAtOnce lookups at once,
// however many are asked together (two sources on one host share them);
// one that finds no free slot within its timeout is recorded as not sent.
func TestLookupsAtOnce(t *testing.T) {
	st := audittest.Open(t, "sqlite", store.Options{})
	var (
		mu            sync.Mutex
		running, most int
		release       = make(chan struct{})
		releaseOnce   sync.Once
		inFlight      = make(chan struct{}, 16) // a request reached the CRM
	)
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		inFlight <- struct{}{}
		if strings.HasPrefix(r.URL.Path, "/held") {
			<-release
		} else {
			time.Sleep(100 * time.Millisecond)
		}
		mu.Lock()
		running--
		mu.Unlock()
		w.Write([]byte(`{"data":[{"reference":"CRM-1"}]}`))
	}))
	t.Cleanup(crm.Close)
	l, err := people.NewLookups(st, audit.Links{}, n8n.Redactor{}, nil, []people.LookupConfig{
		{Source: "shop", URL: crm.URL + "/orders?ref={event_id}", Found: "data.0", Ref: "data.0.reference", Timeout: 5 * time.Second},
		{Source: "held", URL: crm.URL + "/held?ref={event_id}", Found: "data.0", Ref: "data.0.reference", Timeout: 5 * time.Second},
		{Source: "eager", URL: crm.URL + "/orders?ref={event_id}", Found: "data.0", Ref: "data.0.reference",
			Timeout: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	who := people.Who{Name: "alice", Via: audit.ViaAPI}
	for _, src := range []string{"shop", "held", "eager"} {
		for i := range 10 {
			if _, err := st.Claim(ctx, audit.ClaimRequest{Source: src, EventID: fmt.Sprint("e", i), ExecutionID: "1",
				WorkflowID: "wf"}); err != nil {
				t.Fatal(err)
			}
		}
	}

	var wg sync.WaitGroup
	results := make(chan people.Result, 10)
	for i := range 10 {
		wg.Go(func() {
			res, err := l.Run(ctx, audit.EventKey{Source: "shop", EventID: fmt.Sprint("e", i)}, who)
			if err != nil {
				t.Error(err)
			}
			results <- res
		})
	}
	wg.Wait()
	close(results)
	for res := range results {
		if res.Outcome != audit.LookupFound {
			t.Errorf("%s: %s %q", res.EventID, res.Outcome, res.Message)
		}
	}
	if most > people.MaxLookupsAtOnce {
		t.Errorf("the CRM had %d lookups at once, want at most %d", most, people.MaxLookupsAtOnce)
	}
	for len(inFlight) > 0 {
		<-inFlight
	}

	// Every slot of the host held by another source: a lookup waits its
	// timeout and is not sent.
	for i := range people.MaxLookupsAtOnce {
		wg.Go(func() { l.Run(ctx, audit.EventKey{Source: "held", EventID: fmt.Sprint("e", i)}, who) })
	}
	for range people.MaxLookupsAtOnce {
		<-inFlight
	}
	res, err := l.Run(ctx, audit.EventKey{Source: "eager", EventID: "e1"}, who)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != audit.LookupError || !strings.Contains(res.Message, "not sent: 4 lookups of this CRM were running") ||
		len(inFlight) > 0 {
		t.Errorf("with every slot held: %s %q (%d reached the CRM)", res.Outcome, res.Message, len(inFlight))
	}
	free()
	wg.Wait()
}
