package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/migrate"
	"crawlq/internal/queue"
)

// runWorkers runs n workers with cfg until ctx ends.
func runWorkers(ctx context.Context, c *queue.Client, cfg queue.WorkerConfig, n int, h queue.Handler) error {
	if n < 1 {
		return usageErr("--workers must be at least 1")
	}
	ws := make([]*queue.Worker, n)
	for i := range ws {
		w, err := queue.NewWorker(c, cfg, h)
		if err != nil {
			return err
		}
		ws[i] = w
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	wg.Wait()
	return nil
}

func demoQueueCmd() *Command {
	return &Command{
		Name: "demo-queue", Synopsis: "enqueue and work a few thousand no-op jobs, then print stats", Usage: "[--jobs N] [--workers N]",
		Help: `The queue on its own: migrates, enqueues --jobs no-op jobs into the "demo" queue, works them
with several workers while showing progress, then prints the queue stats.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			n := fs.Int("jobs", 5000, "jobs to enqueue")
			workers := fs.Int("workers", 4, "workers")
			return func(ctx context.Context, args []string) error {
				if *n < 1 || *n > 10_000_000 {
					return usageErr("--jobs must be 1..10000000")
				}
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					if _, err := migrate.Up(ctx, pool); err != nil {
						return err
					}
					c := queue.New(pool, queue.Config{})
					ps := make([]queue.EnqueueParams, 0, 5000)
					for i := range *n {
						ps = append(ps, queue.EnqueueParams{Queue: "demo", Kind: "noop", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
						if len(ps) == cap(ps) || i == *n-1 {
							if _, err := c.EnqueueMany(ctx, ps); err != nil {
								return err
							}
							ps = ps[:0]
						}
					}
					fmt.Fprintf(env.Stdout, "enqueued %d no-op jobs into queue \"demo\"; working them with %d workers\n", *n, *workers)
					wctx, stop := context.WithCancel(ctx)
					var wg sync.WaitGroup
					wg.Add(1)
					start := time.Now()
					go func() {
						defer wg.Done()
						runWorkers(wctx, c, queue.WorkerConfig{Queue: "demo", Concurrency: 16, BatchSize: 200}, *workers, queue.Noop)
					}()
					err := waitDrained(ctx, c, "demo", env.Stdout, start)
					stop()
					wg.Wait()
					if err != nil {
						return err
					}
					st, err := c.Stats(ctx)
					if err != nil {
						return err
					}
					fmt.Fprintln(env.Stdout)
					writeStats(env, st)
					return nil
				})
			}
		},
	}
}

// waitDrained shows a progress line until queue q has no available, scheduled or running job.
func waitDrained(ctx context.Context, c *queue.Client, q string, w io.Writer, start time.Time) error {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		for _, s := range st {
			if s.Queue != q {
				continue
			}
			el := time.Since(start).Seconds()
			fmt.Fprintf(w, "\r%6.1fs  done %7d  waiting %7d  running %4d  %8.0f jobs/s ", el, s.Succeeded, s.Available+s.Scheduled, s.Running, float64(s.Succeeded)/el)
			if s.Available+s.Scheduled+s.Running == 0 {
				fmt.Fprintln(w)
				return nil
			}
		}
	}
}
