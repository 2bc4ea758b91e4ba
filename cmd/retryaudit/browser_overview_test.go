package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// overviewCharts are the charts /overview draws.
var overviewCharts = []string{"daily", "hourly", "workflows", "ages", "resolution", "alerts"}

// TestBrowserOverview renders /overview over two weeks of seeded history
// in Chromium, in the light and the dark colour scheme, at desktop and at
// phone width: every chart draws its bars or its line's points in the
// scheme's colours, and none is wider than the screen. The screenshots go
// to the test's artifact directory (kept with go test -artifacts
// -outputdir DIR); RETRYAUDIT_OVERVIEW_PNG=docs/overview.png (a path from
// the repository's root) also writes the light desktop one there, for the
// README.
func TestBrowserOverview(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	seedOverview(t, dir)
	svc := startService(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir})
	ctx, fail := browse(t, browser, svc)
	shots := t.ArtifactDir()

	for _, scheme := range []struct {
		name       string
		background string // the page's, as the stylesheet sets it
		bar        string // the first series' colour
	}{{"light", "rgb(251, 251, 250)", "rgb(43, 108, 176)"}, {"dark", "rgb(21, 24, 27)", "rgb(127, 179, 245)"}} {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme.name}}}); err != nil {
			fail("emulate the "+scheme.name+" scheme", err)
		}
		for _, size := range []struct {
			name          string
			width, height int64
			mobile        bool
		}{{"desktop", 1280, 1600, false}, {"phone", 375, 740, true}} {
			name := scheme.name + " " + size.name
			opts := []chromedp.EmulateViewportOption{}
			if size.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.width, size.height, opts...),
				chromedp.Navigate(svc.URL+"/overview"), chromedp.WaitVisible(css(`figure.chart`))); err != nil {
				fail("overview, "+name, err)
			}
			// Each chart: its id, its bars and its lines' points, whether it
			// says it has nothing to show, its width, and the colour its
			// first series is painted in.
			charts, err := chromedp.Run(ctx, chromedp.Evaluate[[]map[string]any](`[...document.querySelectorAll('figure.chart')].map(f => {
				const s1 = f.querySelector('svg .s1');
				return {id: f.id, bars: f.querySelectorAll('svg g.bars rect').length,
					points: f.querySelectorAll('svg g.series circle').length, empty: !!f.querySelector('p.empty'),
					width: f.getBoundingClientRect().width, s1: s1 ? getComputedStyle(s1).fill : ''};
			})`))
			if err != nil {
				fail("read the overview's charts, "+name, err)
			}
			var ids []string
			for _, c := range charts {
				id := c["id"].(string)
				ids = append(ids, id)
				if c["bars"].(float64)+c["points"].(float64) == 0 || c["empty"].(bool) {
					t.Errorf("%s: chart %s drew nothing: %v", name, id, c)
				}
				if w := c["width"].(float64); w > float64(size.width) {
					t.Errorf("%s: chart %s is %.0fpx wide", name, id, w)
				}
				if s1 := c["s1"].(string); s1 != "" && s1 != scheme.bar {
					t.Errorf("%s: chart %s paints its first series %s, want %s", name, id, s1, scheme.bar)
				}
			}
			if !slices.Equal(ids, overviewCharts) {
				t.Errorf("%s: charts %v, want %v", name, ids, overviewCharts)
			}
			page, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({background: getComputedStyle(document.body).backgroundColor,
				width: document.documentElement.scrollWidth})`))
			if err != nil {
				fail("read the page, "+name, err)
			}
			if page["background"] != scheme.background {
				t.Errorf("%s: the page's background is %v, want %s", name, page["background"], scheme.background)
			}
			if w := page["width"].(float64); w > float64(size.width) {
				t.Errorf("%s: the page is %.0fpx wide", name, w)
			}
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
			if err != nil {
				fail("screenshot, "+name, err)
			}
			if err := os.WriteFile(filepath.Join(shots, "overview-"+scheme.name+"-"+size.name+".png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
			if out := os.Getenv("RETRYAUDIT_OVERVIEW_PNG"); out != "" && name == "light desktop" {
				if !filepath.IsAbs(out) {
					out = filepath.Join("..", "..", out) // the test runs in cmd/retryaudit
				}
				if err := os.WriteFile(out, shot, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s", out)
			}
		}
	}
	t.Logf("overview screenshots: %s", shots)
}
