package bench

import (
	"context"
	"fmt"
	"strings"
	"testing/fstest"

	"crawlq/internal/browser"
	"crawlq/internal/demosite"
	"crawlq/internal/spider"
)

// BrowserTabs is how many pages the browser benchmark renders at once (one Chromium, this many
// tabs), and what scripts/bench-browser.sh gives Puppeteer.
const BrowserTabs = 4

// CrawlBrowser measures what a rendered page costs, in one session, on the script-drawn section
// of the demo site at siteURL (crawlq demo-site): the same pages fetched plainly (op=crawl_plain:
// the item pages' products are drawn by scripts, so no item) and with the item pages rendered by
// headless Chromium, BrowserTabs at once (op=crawl_browser: every item), each with its RESULT
// and _dbcost lines, then
//
//	RESULT system=crawlq op=browser_vs_plain rendered=N ms_cpu_per_rendered_page=… ratio=…
//
// the CPU (this process, Chromium and the crawl's Postgres backends) a rendered page adds over
// a fetched one, per rendered page, and the rendered run's CPU per page over the plain run's.
func CrawlBrowser(ctx context.Context, cfg Config, siteURL string) ([]Result, error) {
	cfg.defaults()
	if !validSchema(cfg.Schema) {
		return nil, fmt.Errorf("bench: schema %q: want lower-case letters, digits and _", cfg.Schema)
	}
	if _, err := browser.FindChromium(""); err != nil {
		return nil, fmt.Errorf("bench: --render browser: %w", err)
	}
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"plain.yaml": {Data: []byte(demosite.JSSpec("js_plain", false))}, "browser.yaml": {Data: []byte(demosite.JSSpec("js_browser", true))}}); err != nil {
		return nil, fmt.Errorf("bench: the script-drawn pages' spiders: %w", err)
	}
	if err := resetSchema(ctx, cfg); err != nil {
		return nil, err
	}
	plain, err := crawlRun(ctx, cfg, reg, "js_plain", siteURL, "crawl_plain", &browser.Config{})
	if err != nil {
		return nil, err
	}
	rendered, err := crawlRun(ctx, cfg, reg, "js_browser", siteURL, "crawl_browser", &browser.Config{TabsPerBrowser: BrowserTabs})
	if err != nil {
		return nil, err
	}
	if rendered.run.Stats.Items == 0 || plain.run.Stats.Pages != rendered.run.Stats.Pages {
		return nil, fmt.Errorf("bench: the rendered run found %d items from %d pages, the plain one %d pages: want items, from the same pages (is %s the demo site?)",
			rendered.run.Stats.Items, rendered.run.Stats.Pages, plain.run.Stats.Pages, siteURL)
	}
	all := func(m crawlMeasure) float64 { return (m.cpu.Self + m.chromium + m.cpu.Backends).Seconds() }
	line := fmt.Sprintf("RESULT system=crawlq op=browser_vs_plain rendered=%d", rendered.run.Stats.Items)
	if rendered.chromiumKnown && rendered.cpu.PGKnown && plain.cpu.PGKnown {
		pages := float64(plain.run.Stats.Pages)
		line += fmt.Sprintf(" ms_cpu_per_rendered_page=%.1f ms_cpu_per_plain_page=%.2f ratio=%.1f",
			(all(rendered)-all(plain))*1000/float64(rendered.run.Stats.Items), all(plain)*1000/pages, all(rendered)/all(plain))
	} else {
		line += " ms_cpu_per_rendered_page=na ms_cpu_per_plain_page=na ratio=na"
	}
	line += fmt.Sprintf(" pages_per_s_ratio=%.3f", rendered.result.PerSec/plain.result.PerSec)
	fmt.Fprintln(cfg.Out, strings.TrimSpace(line))
	return []Result{plain.result, rendered.result}, nil
}
