package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserLookup drives the CRM lookup in Chromium: the review queue's
// "Look up in CRM" button puts the answer on the event's card, and the
// event page shows it beside the resolve form, in the light and the dark scheme and at phone width
// (nothing wider than the screen), then the one-click "Found CRM-123 →
// mark done", and the audit log listing both. Screenshots go to the test's
// artifact directory (go test -artifacts -outputdir DIR).
func TestBrowserLookup(t *testing.T) {
	browser := chromium(t)
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer crm-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"orders":[{"number":"CRM-123","total":"42.00"}]}`))
	}))
	t.Cleanup(crm.Close)
	svc := startService(t, map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
		"RETRYAUDIT_CRM_LOOKUP_SHOP_URL":   crm.URL + "/orders?external_id={source}:{event_id}",
		"RETRYAUDIT_CRM_LOOKUP_SHOP_TOKEN": "crm-token", "RETRYAUDIT_CRM_LOOKUP_SHOP_FOUND": "orders.0",
		"RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "orders.0.number",
		"RETRYAUDIT_CRM_LINKS":           "shop=https://crm.example.com/orders/{crm_ref}"})
	for _, step := range [][2]string{
		{"/v1/claims", `{"source":"shop","event_id":"order-1042","execution_id":"4711","workflow_id":"wf1","workflow_name":"Orders to CRM"}`},
		{"/v1/outcomes", `{"source":"shop","event_id":"order-1042","outcome":"unknown","execution_id":"4711","workflow_id":"wf1","reason":"CRM timed out after 30s"}`},
	} {
		if code, out := svc.api(t, "POST", step[0], step[1]); code != 200 {
			t.Fatalf("%s: %d %s", step[0], code, out)
		}
	}
	ctx, fail := browse(t, browser, svc)
	shots := t.ArtifactDir()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(svc.URL+"/review"),
		chromedp.WaitVisible(css(`section.card form.lookup button`)),
		chromedp.Click(css(`section.card form.lookup button`)),
		chromedp.WaitVisible(css(`section.card div.lookup p.lookup-result`)),
	); err != nil {
		fail("look up from the review queue", err)
	}
	card, err := chromedp.Run(ctx, chromedp.Text(css(`section.card div.lookup`)))
	if err != nil || !strings.Contains(card, "Found CRM-123") {
		t.Errorf("the review card says %q (%v)", card, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(shots, "review-lookup.png"), shot, 0o644)
	}
	if err != nil {
		t.Error(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(svc.URL+"/events/shop/order-1042"),
		chromedp.WaitVisible(css(`section.lookup p.lookup-result`))); err != nil {
		fail("the event page", err)
	}
	result, err := chromedp.Run(ctx, chromedp.Text(css(`section.lookup`)))
	if err != nil {
		fail("read the lookup", err)
	}
	for _, want := range []string{"Found CRM-123", "asked by admin (page)", "Found CRM-123 → mark done"} {
		if !strings.Contains(result, want) {
			t.Errorf("the lookup says %q, want %q in it", result, want)
		}
	}
	for _, scheme := range []string{"light", "dark"} {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			fail("emulate the "+scheme+" scheme", err)
		}
		for _, size := range []struct {
			name          string
			width, height int64
			mobile        bool
		}{{"desktop", 1100, 1400, false}, {"phone", 375, 740, true}} {
			opts := []chromedp.EmulateViewportOption{}
			if size.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.width, size.height, opts...),
				chromedp.Navigate(svc.URL+"/events/shop/order-1042"), chromedp.WaitVisible(css(`section.lookup`))); err != nil {
				fail("the event page, "+scheme+" "+size.name, err)
			}
			width, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
			if err != nil {
				fail("measure", err)
			}
			if width > size.width {
				t.Errorf("%s %s: the page is %dpx wide", scheme, size.name, width)
			}
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				fail("screenshot", err)
			}
			if err := os.WriteFile(filepath.Join(shots, "lookup-"+scheme+"-"+size.name+".png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1100, 1400),
		chromedp.Navigate(svc.URL+"/events/shop/order-1042"),
		chromedp.WaitVisible(css(`section.lookup form.confirm button`)),
		chromedp.Click(css(`section.lookup form.confirm button`)),
		chromedp.WaitVisible(css(`p.notice`)),
	); err != nil {
		fail("one click: found → done", err)
	}
	if status, err := chromedp.Run(ctx, chromedp.Text(css(`.status-line .badge`))); err != nil || strings.TrimSpace(status) != "done" {
		t.Errorf("status after the click: %q %v", status, err)
	}
	if code, out := svc.api(t, "GET", "/v1/events/shop/order-1042", ""); code != 200 || !strings.Contains(out, `"crm_ref":"CRM-123"`) {
		t.Errorf("the API after the click: %d %s", code, out)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(svc.URL+"/audit-log"), chromedp.WaitVisible(css(`table.auditlog`))); err != nil {
		fail("the audit log", err)
	}
	log, err := chromedp.Run(ctx, chromedp.Text(css(`table.auditlog`)))
	if err != nil {
		fail("read the audit log", err)
	}
	if !strings.Contains(log, "resolution:done") || !strings.Contains(log, "lookup:found") {
		t.Errorf("the audit log:\n%s", log)
	}
	// The CSV link, followed with the sign-in the browser holds (a
	// download, which the browser would save rather than show).
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('a[download]').href`))
	if err != nil {
		fail("the CSV link", err)
	}
	req, _ := http.NewRequest("GET", href, nil)
	req.SetBasicAuth("admin", svc.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	csvBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(string(csvBody), "lookup:found") {
		t.Errorf("the CSV link %s: %d %s\n%s", href, resp.StatusCode, resp.Header.Get("Content-Type"), csvBody)
	}
	shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(shots, "audit-log.png"), shot, 0o644)
	}
	if err != nil {
		t.Error(err)
	}
	t.Logf("screenshots: %s", shots)
}
