package slackact_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/people"
	"github.com/retryaudit/retryaudit/slackact"
)

func TestLookUpInCRMFromSlack(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if strings.Contains(r.URL.RawQuery, "ord-7") {
				w.Write([]byte(`{"orders":[{"reference":"CRM-123 <!channel>"}]}`))
				return
			}
			w.Write([]byte(`{"orders":[]}`))
		}))
		t.Cleanup(crm.Close)
		r := newRig(t, dialect)
		l, err := people.NewLookups(r.store, audit.Links{}, n8n.Redactor{}, nil, []people.LookupConfig{{Source: "shop",
			URL: crm.URL + "/orders?external_id={event_id}", Ref: "orders.0.reference", Found: "orders.0"}})
		if err != nil {
			t.Fatal(err)
		}
		r.worker.Renderer.Actions.Lookup = l.Configured
		r.handler.Actions = slackact.StoreActions{Store: r.store, LookupFunc: slackact.PeopleLookup(l)}

		for i, tc := range []struct{ event, says string }{
			{"ord-7", "Found in the CRM: shop/ord-7 is order CRM-123 &lt;!channel&gt;. If that is this event's order, press Mark done."},
			{"ord-8", "Not found in the CRM: shop/ord-8. If it should be there, press Mark failed"},
		} {
			r.unknown(t, tc.event)
			b := buttons(t, r.slack.waitFor(t, "chat.postMessage", i+1)[i].Blocks)
			if b[notify.ActionLookup] == "" {
				t.Fatalf("no Look up in CRM button: %v", b)
			}
			before := r.event(t, tc.event)
			r.post(signed(form(payload(alice, notify.ActionLookup, b[notify.ActionLookup])), secret, time.Now()))
			eph := r.slack.waitFor(t, "chat.postEphemeral", i+1)[i]
			if !strings.Contains(eph.Text, tc.says) {
				t.Fatalf("the answer %q does not say %q", eph.Text, tc.says)
			}
			after := r.event(t, tc.event)
			if after.Status != before.Status {
				t.Fatalf("a lookup moved the entry: %s → %s", before.Status, after.Status)
			}
			last := after.History[len(after.History)-1]
			if last.Kind != audit.KindLookup || last.Actor != "alice" || last.Delivery != audit.ViaSlack {
				t.Fatalf("the history's last line: %+v", last)
			}
		}
	})
}
