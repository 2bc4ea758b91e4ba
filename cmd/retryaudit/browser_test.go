package main

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromium finds the browser for the browser tests: RETRYAUDIT_TEST_CHROMIUM,
// or chromium on the PATH. Without one the test is skipped, unless
// RETRYAUDIT_TEST_REQUIRE_CHROMIUM=1 (CI), which makes it fail.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RETRYAUDIT_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("RETRYAUDIT_TEST_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("Chromium is required (RETRYAUDIT_TEST_REQUIRE_CHROMIUM=1) but was not found: apt-get install chromium")
	}
	t.Skip("no Chromium (set RETRYAUDIT_TEST_CHROMIUM or install chromium)")
	return ""
}

// TestBrowserResolve drives a real browser against the running service: it
// opens the review queue, follows the event, marks it done with a CRM
// reference and a note, and sees the new status and the history line; then
// it resolves a running entry, which takes the confirmation that nothing
// still runs it.
func TestBrowserResolve(t *testing.T) {
	browser := chromium(t)
	svc := startService(t, nil)
	for _, body := range []string{
		`{"source":"shop","event_id":"order-1042","execution_id":"4711","workflow_id":"wf1","workflow_name":"Orders to CRM"}`,
		`{"source":"shop","event_id":"order-1042","outcome":"unknown","execution_id":"4711","workflow_id":"wf1","reason":"CRM timed out after 30s"}`,
		`{"source":"shop","event_id":"order-2000","execution_id":"4800","workflow_id":"wf1","workflow_name":"Orders to CRM"}`,
		`{"source":"shop","event_id":"order-3000","execution_id":"4900","workflow_id":"wf1","workflow_name":"Orders to CRM"}`,
		`{"source":"shop","event_id":"order-3000","outcome":"unknown","execution_id":"4900","workflow_id":"wf1","reason":"CRM timed out after 30s"}`,
	} {
		path := "/v1/claims"
		if strings.Contains(body, "outcome") {
			path = "/v1/outcomes"
		}
		if code, out := svc.api(t, "POST", path, body); code != 200 {
			t.Fatalf("%s: %d %s", path, code, out)
		}
	}

	ctx, fail := browse(t, browser, svc)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(svc.URL+"/review"),
		chromedp.WaitVisible(css(`section.card h2 a`)),
		chromedp.Click(css(`section.card h2 a`)),
		chromedp.WaitVisible(css(`form.resolve`)),
		chromedp.Click(css(`form.resolve input[value="done"]`)),
		chromedp.SendKeys(css(`form.resolve input[name="crm_ref"]`), "CRM-88121"),
		chromedp.SendKeys(css(`form.resolve textarea[name="note"]`), "order 88121 is in the CRM"),
		chromedp.Click(css(`form.resolve button[type="submit"]`)),
		chromedp.WaitVisible(css(`p.notice`)),
	); err != nil {
		fail("resolve", err)
	}
	read := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		if err != nil {
			fail("read "+sel, err)
		}
		return v
	}
	notice, status, history := read(`p.notice`), read(`.status-line .badge`), read(`ol.timeline`)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		fail("screenshot", err)
	}
	if strings.TrimSpace(status) != "done" {
		t.Errorf("status after resolving = %q", status)
	}
	if !strings.Contains(history, "Resolved done by admin") || !strings.Contains(history, "order 88121 is in the CRM") {
		t.Errorf("history after resolving:\n%s", history)
	}
	if !strings.Contains(notice, "Marked done") {
		t.Errorf("notice = %q", notice)
	}
	dir := t.ArtifactDir()
	path := filepath.Join(dir, "resolved.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if code, out := svc.api(t, "GET", "/v1/events/shop/order-1042", ""); code != 200 || !strings.Contains(out, `"status":"done"`) ||
		!strings.Contains(out, `"crm_ref":"CRM-88121"`) {
		t.Errorf("the API after resolving: %d %s", code, out)
	}

	// A running entry: the form sits folded away and takes the
	// confirmation; the browser refuses to send it without.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(svc.URL+"/events/shop/order-2000"),
		chromedp.WaitVisible(css(`details.resolve-running summary`)),
		chromedp.Click(css(`details.resolve-running summary`)),
		chromedp.WaitVisible(css(`form.resolve input[name="confirm"]`)),
		chromedp.Click(css(`form.resolve input[value="failed"]`)),
		chromedp.SendKeys(css(`form.resolve textarea[name="note"]`), "no order 2000 in the CRM; execution 4800 crashed"),
		chromedp.Click(css(`form.resolve button[type="submit"]`)),
	); err != nil {
		fail("resolve a running entry", err)
	}
	if code, out := svc.api(t, "GET", "/v1/events/shop/order-2000", ""); code != 200 || !strings.Contains(out, `"status":"processing"`) {
		t.Fatalf("the form went out without the confirmation: %d %s", code, out)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(css(`form.resolve input[name="confirm"]`)),
		chromedp.Click(css(`form.resolve button[type="submit"]`)),
		chromedp.WaitVisible(css(`p.notice`)),
	); err != nil {
		fail("confirm and resolve a running entry", err)
	}
	if status := read(`.status-line .badge`); strings.TrimSpace(status) != "failed" {
		t.Errorf("the running entry after resolving: %q", status)
	}

	// At phone width the page fits: nothing wider than the screen.
	for _, path := range []string{"/overview", "/", "/events/shop/order-1042", "/review", "/errors"} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(375, 740, chromedp.EmulateMobile),
			chromedp.Navigate(svc.URL+path), chromedp.WaitVisible(css(`main`))); err != nil {
			fail("phone width "+path, err)
		}
		width, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
		if err != nil {
			fail("measure "+path, err)
		}
		if width > 375 {
			t.Errorf("%s is %dpx wide at a 375px screen", path, width)
		}
	}
	phone, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "phone-errors.png"), phone, 0o644)
	}
	if err != nil {
		t.Error(err)
	}
}

// browse starts Chromium for the test, signed in to svc as admin. It
// returns the browser's context (a minute long) and a function that ends
// the test with the service's output.
func browse(t *testing.T, browser string, svc *service) (context.Context, func(step string, err error)) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1000, 1400))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(browserCtx); err != nil { // starts the browser, for as long as browserCtx lives
		t.Fatalf("start %s: %v", browser, err)
	}
	ctx, cancelTimeout := context.WithTimeout(browserCtx, 60*time.Second)
	t.Cleanup(cancelTimeout)

	fail := func(step string, err error) {
		t.Helper()
		t.Fatalf("browser: %s: %v\nservice output:\n%s", step, err, svc.Output.String())
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+svc.Password))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		fail("enable the network domain", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		fail("sign in", err)
	}
	return ctx, fail
}

func css(s string) chromedp.CSS { return chromedp.CSS(s) }
