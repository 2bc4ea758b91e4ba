package audit_test

import (
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
)

func TestCRMLinks(t *testing.T) {
	crm, err := audit.ParseCRMLinks("shop=https://crm.example.com/orders?external_id={event_id}, " +
		"payments=https://pay.example.com/p/{crm_ref}/{item}?src={source}")
	if err != nil {
		t.Fatal(err)
	}
	l := audit.Links{BaseURL: "https://ra.example", CRM: crm}
	tests := []struct {
		source, event, item, ref, want string
	}{
		{"shop", "order 1042&x=1", "", "", "https://crm.example.com/orders?external_id=order+1042%26x%3D1"},
		{"payments", "e", "line/2", "R 9", "https://pay.example.com/p/R%209/line%2F2?src=payments"},
		{"other", "e", "", "", ""},
	}
	for _, tc := range tests {
		if got := l.CRMOrder(tc.source, tc.event, tc.item, tc.ref); got != tc.want {
			t.Errorf("CRMOrder(%s, %q) = %q, want %q", tc.source, tc.event, got, tc.want)
		}
	}
	if got := l.Event("shop", "a/b %ü"); got != "https://ra.example/events/shop/a%2Fb%20%25%C3%BC" {
		t.Errorf("Event = %s", got)
	}
	for _, bad := range []string{"shop", "shop=ftp://x/{event_id}", "shop=https://x/{order}", "=https://x",
		"shop=https://crm.example{crm_ref}", "shop=https://{source}.crm.example/o"} {
		if _, err := audit.ParseCRMLinks(bad); err == nil {
			t.Errorf("ParseCRMLinks(%q) accepted it", bad)
		} else if strings.Contains(bad, "{order}") && !strings.Contains(err.Error(), "{order}") {
			t.Errorf("the error does not name the placeholder: %v", err)
		}
	}
}

// TestDotIDLinks: ids that browsers resolve as dot segments get links that
// survive it, and the handlers read them back.
func TestDotIDLinks(t *testing.T) {
	l := audit.Links{BaseURL: "https://ra.example"}
	for _, tc := range []struct{ source, id string }{{"shop", "."}, {"shop", ".."}, {"..", "order-1"}, {".", "."}} {
		link := l.Event(tc.source, tc.id)
		rest, ok := strings.CutPrefix(link, "https://ra.example/events/~/")
		if !ok || strings.Contains(link, "/./") || strings.Contains(link, "/../") || strings.HasSuffix(link, "/.") || strings.HasSuffix(link, "/..") {
			t.Errorf("Event(%q, %q) = %s", tc.source, tc.id, link)
			continue
		}
		if s, id, ok := audit.DecodeEventPath(rest); !ok || s != tc.source || id != tc.id {
			t.Errorf("%s decodes to %q %q", link, s, id)
		}
	}
	if got := l.Event("shop", "a.b"); got != "https://ra.example/events/shop/a.b" {
		t.Errorf("an ordinary id: %s", got)
	}
	if got := l.Execution(".."); got != "https://ra.example/exec/Li4" {
		t.Errorf("Execution(..) = %s", got)
	}
}
