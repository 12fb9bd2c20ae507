package bench

import (
	"context"
	"fmt"
	"strings"
	"testing/fstest"

	"crawlq/internal/spider"
	"crawlq/spiders"
)

// Recrawl measures what a recrawl of an unchanged site costs against a full crawl of it, in one
// session, on the demo site at siteURL (crawlq demo-site --items 10000), in the bench schema: the
// demo spider (spiders/demo.yaml, concurrency 32) crawls it in full as it always does
// (op=crawl_always, revisit: always), then with revisit: changed_only twice: a first run that
// finds no URL state, crawls in full and records it (op=recrawl_first), and a recrawl that asks
// every page with its validators, gets 304s, parses nothing and follows the stored links
// (op=recrawl). Each prints a RESULT line and a _dbcost line, then
//
//	RESULT system=crawlq op=recrawl_vs_full … cpu_per_page_ratio=R total_cpu_per_page_ratio=T
//
// where R is this process's CPU per page and T that plus the server's, the recrawl's over the
// full crawl's (crawl_always).
func Recrawl(ctx context.Context, cfg Config, siteURL string) ([]Result, error) {
	cfg.defaults()
	if !validSchema(cfg.Schema) {
		return nil, fmt.Errorf("bench: schema %q: want lower-case letters, digits and _", cfg.Schema)
	}
	demo, err := spiders.FS.ReadFile("demo.yaml")
	if err != nil {
		return nil, fmt.Errorf("bench: the demo spider: %w", err)
	}
	spec := strings.Replace(string(demo), "\nconcurrency: 4\n", "\nconcurrency: 32\n", 1)
	always := strings.Replace(spec, "\nname: demo\n", "\nname: demo_always\n", 1)
	spec += "revisit: changed_only\n"
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"demo.yaml": {Data: []byte(spec)}, "always.yaml": {Data: []byte(always)}}); err != nil {
		return nil, fmt.Errorf("bench: the demo spider with revisit: %w", err)
	}
	if err := resetSchema(ctx, cfg); err != nil {
		return nil, err
	}
	full, err := crawlRun(ctx, cfg, reg, "demo_always", siteURL, "crawl_always", nil)
	if err != nil {
		return nil, err
	}
	first, err := crawlRun(ctx, cfg, reg, "demo", siteURL, "recrawl_first", nil)
	if err != nil {
		return nil, err
	}
	again, err := crawlRun(ctx, cfg, reg, "demo", siteURL, "recrawl", nil)
	if err != nil {
		return nil, err
	}
	per := func(m crawlMeasure, total bool) float64 {
		d := m.cpu.Self
		if total {
			d += m.cpu.PG
		}
		return d.Seconds() / float64(max(m.run.Stats.Pages, 1))
	}
	ratio := "na"
	if full.cpu.PGKnown && again.cpu.PGKnown {
		ratio = fmt.Sprintf("%.3f", per(again, true)/per(full, true))
	}
	fmt.Fprintf(cfg.Out, "RESULT system=crawlq op=recrawl_vs_full not_modified=%d of_pages=%d items_unchanged=%d cpu_per_page_ratio=%.3f total_cpu_per_page_ratio=%s\n",
		again.run.Stats.ErrorsByKind["not_modified"], again.run.Stats.Pages, again.run.Stats.ErrorsByKind["items_unchanged"],
		per(again, false)/per(full, false), ratio)
	return []Result{full.result, first.result, again.result}, nil
}
