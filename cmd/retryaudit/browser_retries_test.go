package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// retryingN8N is n8n's API as a retry meets it: a failed execution is
// retried, and the Retry reports done to the service as the shipped
// workflow's Report outcome step does.
type retryingN8N struct {
	*httptest.Server
	mu      sync.Mutex
	svc     *service
	status  map[string]string
	retryOf map[string]string
	events  map[string]string
	seq     int
	started string
}

func newRetryingN8N(t *testing.T) *retryingN8N {
	f := &retryingN8N{status: map[string]string{}, retryOf: map[string]string{}, events: map[string]string{}, seq: 9000,
		started: time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *retryingN8N) serve(w http.ResponseWriter, r *http.Request) {
	id, retry := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/executions/"), "/retry")
	w.Header().Set("Content-Type", "application/json")
	f.mu.Lock()
	st, ok := f.status[id]
	x := map[string]any{"id": id, "workflowId": "wf1", "mode": "webhook", "status": st, "retryOf": nil, "startedAt": f.started}
	if of := f.retryOf[id]; of != "" {
		x["mode"], x["retryOf"] = "retry", of
	}
	if !ok || retry && st != "error" {
		f.mu.Unlock()
		w.WriteHeader(map[bool]int{true: http.StatusConflict, false: http.StatusNotFound}[ok])
		fmt.Fprint(w, `{"message":"no"}`)
		return
	}
	if !retry {
		f.mu.Unlock()
		json.NewEncoder(w).Encode(x)
		return
	}
	f.seq++
	newID := fmt.Sprint(f.seq)
	f.status[newID], f.retryOf[newID] = "running", id
	event := f.events[id]
	f.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // the CRM step
	req, _ := http.NewRequest("POST", f.svc.URL+"/v1/outcomes", strings.NewReader(fmt.Sprintf(
		`{"source":"shop","event_id":%q,"outcome":"done","execution_id":%q,"workflow_id":"wf1","crm_ref":"CRM-%s"}`,
		event, newID, newID)))
	req.Header.Set("Authorization", "Bearer "+f.svc.Token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	f.mu.Lock()
	f.status[newID] = "success"
	f.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"id": newID, "workflowId": "wf1", "mode": "retry", "status": "success",
		"retryOf": id})
}

// TestBrowserRetries drives the bulk retry page in a real browser: the
// preview of a filter (what is retried, what is skipped and why), the run
// started from it, and its summary; in light and dark, and at phone width,
// screenshots kept as artifacts.
func TestBrowserRetries(t *testing.T) {
	browser := chromium(t)
	f := newRetryingN8N(t)
	svc := startService(t, map[string]string{"RETRYAUDIT_N8N_API_URL": f.URL + "/api/v1",
		"RETRYAUDIT_N8N_API_KEY": "n8n-key", "RETRYAUDIT_RETRY_RATE": "300"})
	f.svc = svc
	for i, st := range []string{"failed", "failed", "failed", "failed", "", "done"} {
		id, exec := fmt.Sprintf("order-%d", 7001+i), fmt.Sprint(501+i)
		f.mu.Lock()
		f.status[exec], f.events[exec] = "running", id
		f.mu.Unlock()
		if code, out := svc.api(t, "POST", "/v1/claims", fmt.Sprintf(
			`{"source":"shop","event_id":%q,"execution_id":%q,"workflow_id":"wf1","workflow_name":"Orders to CRM"}`, id, exec)); code != 200 {
			t.Fatalf("claim: %d %s", code, out)
		}
		if st != "" {
			if code, out := svc.api(t, "POST", "/v1/outcomes", fmt.Sprintf(
				`{"source":"shop","event_id":%q,"outcome":%q,"execution_id":%q,"workflow_id":"wf1","reason":"CRM answered 503"}`,
				id, st, exec)); code != 200 {
				t.Fatalf("outcome: %d %s", code, out)
			}
		}
		f.mu.Lock()
		f.status[exec] = map[string]string{"failed": "error", "": "running", "done": "success"}[st]
		f.mu.Unlock()
	}

	ctx, fail := browse(t, browser, svc)
	dir := t.ArtifactDir()
	scheme := func(s string) {
		t.Helper()
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}}}); err != nil {
			fail("prefers-color-scheme "+s, err)
		}
	}
	shoot := func(name string) {
		t.Helper()
		for _, mode := range []struct {
			suffix, scheme string
			width          int64
		}{{"", "light", 1000}, {"-dark", "dark", 1000}, {"-phone", "light", 375}} {
			mobile := mode.width < 500
			scheme(mode.scheme)
			viewport := chromedp.EmulateViewport(mode.width, 900)
			if mobile {
				viewport = chromedp.EmulateViewport(mode.width, 900, chromedp.EmulateMobile)
			}
			if err := chromedp.Do(ctx, viewport, chromedp.Reload(), chromedp.WaitVisible(css(`main`))); err != nil {
				fail("show "+name+mode.suffix, err)
			}
			if mobile {
				width, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
				if err != nil {
					fail("measure", err)
				}
				if width > 375 {
					t.Errorf("%s is %dpx wide at a 375px screen", name, width)
				}
			}
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				fail("screenshot", err)
			}
			path := filepath.Join(dir, name+mode.suffix+".png")
			if err := os.WriteFile(path, shot, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", path)
		}
		scheme("light")
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1000, 1400)); err != nil {
			fail("reset", err)
		}
	}
	read := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		if err != nil {
			fail("read "+sel, err)
		}
		return v
	}

	if err := chromedp.Do(ctx,
		chromedp.Navigate(svc.URL+"/review"),
		chromedp.Click(css(`a[href="/retries"]`)),
		chromedp.WaitVisible(css(`form.filters`)),
		chromedp.SendKeys(css(`form.filters input[name="source"]`), "shop"),
		chromedp.Click(css(`form.filters button[type="submit"]`)),
		chromedp.WaitVisible(css(`section.plan`)),
	); err != nil {
		fail("preview", err)
	}
	plan := read(`section.plan`)
	for _, want := range []string{"Preview: 4 to retry of 5 entries", "Nothing has been sent yet", "1 done entry matches",
		"skip: processing"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the preview lacks %q:\n%s", want, plan)
		}
	}
	f.mu.Lock()
	sent := f.seq
	f.mu.Unlock()
	if sent != 9000 {
		t.Errorf("the preview sent %d retries", sent-9000)
	}
	shoot("retries-preview")

	// A failed event's page offers the single retry.
	if err := chromedp.Do(ctx, chromedp.Navigate(svc.URL+"/events/shop/order-7001"),
		chromedp.WaitVisible(css(`form.retry button`))); err != nil {
		fail("the event's Retry in n8n", err)
	}
	shoot("event-retry")

	if err := chromedp.Do(ctx,
		chromedp.Navigate(svc.URL+"/retries?source=shop"),
		chromedp.WaitVisible(css(`form.start button`)),
		chromedp.Click(css(`form.start button`)),
		chromedp.WaitVisible(css(`p.summary`)),
	); err != nil {
		fail("start the run", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for summary := read(`p.summary`); !strings.Contains(summary, "4 retried (4 succeeded"); summary = read(`p.summary`) {
		if time.Now().After(deadline) {
			t.Fatalf("the run's summary: %s", summary)
		}
		time.Sleep(500 * time.Millisecond)
		if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(css(`p.summary`))); err != nil {
			fail("reload the run", err)
		}
	}
	shoot("retries-summary")
	for i := range 4 {
		if code, out := svc.api(t, "GET", fmt.Sprintf("/v1/events/shop/order-%d", 7001+i), ""); code != 200 ||
			!strings.Contains(out, `"status":"done"`) {
			t.Errorf("order-%d after the run: %d %.200s", 7001+i, code, out)
		}
	}
}
