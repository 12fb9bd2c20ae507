package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"crawlq/internal/crawl"
	"crawlq/internal/demosite"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/migrate"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

func demoCmd() *Command {
	return &Command{
		Name: "demo", Synopsis: "crawl the demo site with several workers and show the result", Usage: "[--items N] [--workers N]",
		Help: `The main job, end to end on this machine: serves the demo catalogue on a loopback port,
migrates the database, starts workers, schedules the demo spider against the site, shows live
progress, then prints the run summary and a few items. Exits 1 if the crawl did not yield
exactly what the site says a correct crawl yields.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			nItems := fs.Int("items", 1200, "item pages on the demo site")
			workers := fs.Int("workers", 4, "workers")
			conc := fs.Int("concurrency", 8, "jobs in flight per worker")
			return func(ctx context.Context, args []string) error {
				cfg := demosite.Config{Items: *nItems}
				if err := cfg.Validate(); err != nil {
					return usageErr("%v", err)
				}
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					if _, err := migrate.Up(ctx, pool); err != nil {
						return err
					}
					siteCtx, stopSite := context.WithCancel(ctx)
					defer stopSite()
					site := demosite.New(cfg)
					addr, err := site.Serve(siteCtx, "127.0.0.1:0")
					if err != nil {
						return err
					}
					exp := site.Expected()
					base := "http://" + addr.String()
					fmt.Fprintf(env.Stdout, "demo site at %s: %d item pages on %d listings (a correct crawl yields %d items)\n", base, cfg.Items, exp.Listings, exp.Items)

					var once sync.Once
					finished := make(chan string, 1)
					var runID int64
					var mu sync.Mutex
					n, err := node.New(node.Config{Pool: pool, Workers: *workers, Worker: queue.WorkerConfig{Concurrency: *conc},
						Fetch: fetch.Config{AllowLoopback: true}, // the demo site above, on loopback
						OnFinish: func(id int64, state string) {
							mu.Lock()
							mine := id == runID
							mu.Unlock()
							if mine {
								once.Do(func() { finished <- state })
							}
						}})
					if err != nil {
						return err
					}
					workCtx, stopWork := context.WithCancel(ctx)
					nodeDone := make(chan error, 1)
					go func() { nodeDone <- n.Run(workCtx) }()
					defer func() { stopWork(); <-nodeDone }()

					start := time.Now()
					mu.Lock()
					s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
					runID = s.RunID
					mu.Unlock()
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "scheduled run %d of spider \"demo\" with %d workers × %d\n", s.RunID, *workers, *conc)
					state, err := demoProgress(ctx, env.Stdout, n, s.RunID, start, finished)
					if err != nil {
						return err
					}
					r, err := n.Crawler.Get(ctx, s.RunID)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "\nrun %d %s in %.1fs: %s\n", r.ID, state, r.Stats.Duration, demoFigures(r.Stats, exp.NotFound))
					sample, err := items.ListItems(ctx, pool, s.RunID, 3)
					if err != nil {
						return err
					}
					fmt.Fprintln(env.Stdout, "a few items:")
					for _, it := range sample {
						fmt.Fprintf(env.Stdout, "  %s %s\n", it.Key, it.Data)
					}
					// make demo's database is one it started: the shell the reader types in next
					// has no DATABASE_URL, so the hint says how to get it.
					fmt.Fprintf(env.Stdout, "see them all: crawlq items %d --limit 10000 (on this database: after make demo, export DATABASE_URL=$(make -s db) first)\n", s.RunID)
					if r.State != "succeeded" || r.Stats.Items != int64(exp.Items) {
						return fmt.Errorf("%w: run %s with %d items, want succeeded with %d", errDemoMismatch, r.State, r.Stats.Items, exp.Items)
					}
					fmt.Fprintf(env.Stdout, "OK: exactly the %d items a correct crawl yields; the server saw %d requests for %d distinct URLs (robots.txt, redirects and not-found answers are requests, not pages)\n",
						exp.Items, totalHits(site), len(site.Hits()))
					return nil
				})
			}
		},
	}
}

// demoFigures is a demo run's figures, saying what its errors are: the site links pages that
// answer 404 on purpose (notFound), and those are the errors of a correct crawl.
func demoFigures(st crawl.Stats, notFound int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d pages, %d items, %d bytes, %d errors (pages that failed for good; the site links %d that answer 404 on purpose), %d retries",
		st.Pages, st.Items, st.Bytes, st.Errors, notFound, st.Retries)
	if st.HostPauses > 0 {
		fmt.Fprintf(&b, ", %d host pauses (waits for the site while it was down, not errors)", st.HostPauses)
	}
	fmt.Fprintf(&b, "; every outcome by kind (errors, retries and skips): %s", kindCounts(st.ErrorsByKind))
	return b.String()
}

// kindCounts lists a run's errors_by_kind as "redirect 1, status_4xx 1" in name order: the
// kinds hold skips (a redirect, a robots.txt refusal) beside errors, so a bare count next to a
// Go map read as 1 error of 52.
func kindCounts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	kinds := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func totalHits(s *demosite.Site) int64 {
	var n int64
	for _, h := range s.Hits() {
		n += h
	}
	return n
}

// demoProgress shows pages, items, queue depth and rate until the run finishes.
func demoProgress(ctx context.Context, w io.Writer, n *node.Node, runID int64, start time.Time, finished <-chan string) (string, error) {
	tty := isTerminal(w)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	last := time.Time{}
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-deadline:
			return "", fmt.Errorf("run %d did not finish within 5 minutes", runID)
		case st := <-finished:
			return st, nil
		case <-t.C:
		}
		if !tty && time.Since(last) < time.Second {
			continue
		}
		last = time.Now()
		r, err := n.Crawler.Get(ctx, runID)
		if err != nil {
			return "", err
		}
		depth := int64(0)
		if st, err := n.Queue.Stats(ctx); err == nil {
			for _, s := range st {
				if s.Queue == r.Queue {
					depth = s.Available + s.Scheduled + s.Running
				}
			}
		}
		el := time.Since(start).Seconds()
		line := fmt.Sprintf("%5.1fs  pages %5d  items %5d  queue %5d  %6.0f pages/s", el, r.Stats.Pages, r.Stats.Items, depth, float64(r.Stats.Pages)/el)
		if tty {
			fmt.Fprintf(w, "\r%s %s", bar(r.Stats.Pages, r.Stats.Pages+depth), line)
		} else {
			fmt.Fprintln(w, line)
		}
		if r.Finished() {
			return r.State, nil
		}
	}
}

func bar(done, total int64) string {
	const width = 24
	if total <= 0 {
		total = 1
	}
	k := int(float64(width) * float64(done) / float64(total))
	k = min(max(k, 0), width)
	return "[" + strings.Repeat("#", k) + strings.Repeat(".", width-k) + "]"
}

// isTerminal says whether w is a terminal (not merely a character device: /dev/null is one).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
