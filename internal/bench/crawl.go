package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"crawlq/internal/browser"
	"crawlq/internal/crawl"
	"crawlq/internal/fetch"
	"crawlq/internal/migrate"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// Crawl crawls the synthetic catalogue of ../shared/bench/site at siteURL with the benchsite
// spider, every page a durable job and every item written to Postgres, and prints
// RESULT system=crawlq op=crawl pages=N items=M seconds=S pages_per_s=R, then what the crawl
// cost (cpu.go): allocs_per_page, cpu_s, pg_cpu_s and their sum per 1,000 pages. CPU is what a page
// costs where the fetch waits on the network, and unlike pages/s it barely depends on how
// busy the machine is. Then the database cost of a page (dbcost.go) as
// RESULT system=crawlq op=crawl_dbcost pages=N statements_per=… .
func Crawl(ctx context.Context, cfg Config, siteURL string) (Result, error) {
	cfg.defaults()
	if !validSchema(cfg.Schema) {
		return Result{}, fmt.Errorf("bench: schema %q: want lower-case letters, digits and _", cfg.Schema)
	}
	if err := resetSchema(ctx, cfg); err != nil {
		return Result{}, err
	}
	m, err := crawlRun(ctx, cfg, nil, "benchsite", siteURL, "crawl", nil)
	if err != nil {
		return Result{}, err
	}
	return m.result, nil
}

// crawlMeasure is what one measured run cost.
type crawlMeasure struct {
	result Result
	run    *crawl.Run
	cpu    *cpuMeter
	// chromium is the CPU of the Chromium processes the run started (all of them reaped by its
	// end); chromiumKnown is false where it cannot be read (not Unix).
	chromium      time.Duration
	chromiumKnown bool
}

// crawlRun runs spider (from reg; nil: the built-in specs) against siteURL once in the bench
// schema, on a node and pool of its own, and prints its RESULT line as op and its database cost
// as op_dbcost. With br, the node renders the pages of browser spiders (working the crawl and long
// queues) and the line adds the Chromium processes' CPU (chromium_cpu_s, and per 1,000 pages
// all_cpu_s_per_1k_pages: this process's, Chromium's and the crawl's Postgres backends').
func crawlRun(ctx context.Context, cfg Config, reg *spider.Registry, spiderName, siteURL, op string, br *browser.Config) (crawlMeasure, error) {
	counter := &Counter{}
	pool, err := openCounted(ctx, cfg, int32(cfg.PoolConns), counter)
	if err != nil {
		return crawlMeasure{}, err
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool); err != nil {
		return crawlMeasure{}, err
	}
	meter, err := startMeter(ctx, cfg, counter)
	if err != nil {
		return crawlMeasure{}, err
	}
	defer meter.close()
	finished := make(chan struct{})
	var once atomic.Bool
	var queues []string
	if br != nil {
		queues = []string{"crawl", "long"} // a browser spider's pages are on the runners' queue
	}
	n, err := node.New(node.Config{Pool: pool, Spiders: reg, Workers: cfg.Workers, Worker: queue.WorkerConfig{Concurrency: cfg.Concurrency, BatchSize: cfg.Concurrency * 2},
		Fetch:   fetch.Config{AllowLoopback: true}, // the bench site is served on loopback
		Browser: br, Queues: queues,
		OnFinish: func(int64, string) {
			if once.CompareAndSwap(false, true) {
				close(finished)
			}
		}})
	if err != nil {
		return crawlMeasure{}, err
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(wctx) }()
	halt := sync.OnceFunc(func() { stop(); <-done })
	defer halt()
	cpu := startCPU(ctx, pool)
	child0, childKnown := childrenCPU()
	start := time.Now()
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: spiderName, Args: map[string]string{"base_url": siteURL}})
	if err != nil {
		return crawlMeasure{}, err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for wait := true; wait; {
		select {
		case <-finished:
			wait = false
		case <-ctx.Done():
			return crawlMeasure{}, ctx.Err()
		case <-tick.C:
			if cfg.Progress != nil {
				if r, err := n.Crawler.Get(ctx, s.RunID); err == nil {
					fmt.Fprintf(cfg.Progress, "  %s: %d pages, %d items (%.0f pages/s)\n", op, r.Stats.Pages, r.Stats.Items, float64(r.Stats.Pages)/time.Since(start).Seconds())
				}
			}
		}
	}
	el := time.Since(start).Seconds()
	cpu.stop()
	r, err := n.Crawler.Get(ctx, s.RunID)
	if err != nil {
		return crawlMeasure{}, err
	}
	halt() // stops the browsers too: their processes are reaped, their CPU counted
	m := crawlMeasure{run: r, cpu: cpu}
	extra := ""
	if br != nil {
		child1, _ := childrenCPU()
		m.chromium, m.chromiumKnown = child1-child0, childKnown
		extra = " chromium_cpu_s=na all_cpu_s_per_1k_pages=na"
		if m.chromiumKnown && cpu.PGKnown && r.Stats.Pages > 0 {
			extra = fmt.Sprintf(" chromium_cpu_s=%.2f all_cpu_s_per_1k_pages=%.3f", m.chromium.Seconds(),
				(cpu.Self+m.chromium+cpu.Backends).Seconds()*1000/float64(r.Stats.Pages))
		}
	}
	rate := fmt.Sprintf("%.0f", float64(r.Stats.Pages)/el)
	if br != nil {
		rate = fmt.Sprintf("%.1f", float64(r.Stats.Pages)/el) // a few pages a second
	}
	fmt.Fprintf(cfg.Out, "RESULT system=crawlq op=%s pages=%d items=%d seconds=%.3f pages_per_s=%s %s%s\n",
		op, r.Stats.Pages, r.Stats.Items, el, rate, cpu.fields(r.Stats.Pages), extra)
	pool.Close()
	cost, err := meter.finish(ctx, r.Stats.Pages)
	if err != nil {
		return crawlMeasure{}, err
	}
	fmt.Fprintln(cfg.Out, cost.line("crawlq", op+"_dbcost", "pages"))
	m.result = Result{Op: op, Jobs: int(r.Stats.Pages), Seconds: el, PerSec: float64(r.Stats.Pages) / el}
	return m, nil
}
