package lambdafn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/awsx"
	"crawlq/internal/clock"
	"crawlq/internal/dispatch"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// WorkerOptions tune the worker handler. The zero value suits a Lambda of a few minutes.
type WorkerOptions struct {
	// Margin is kept free before the invocation's deadline: the worker stops claiming at
	// deadline-Margin, and running jobs get StopGrace of it to finish. Default 20s.
	Margin time.Duration
	// StopGrace is how long running jobs may finish once claiming stops, before they are
	// cancelled and released. Default Margin/2.
	StopGrace time.Duration
	// IdleExit ends the invocation after this long with nothing claimed and nothing running,
	// so an idle worker does not bill until its deadline. Default 10s.
	IdleExit time.Duration
	// Worker is the template queue worker config (Queue, Kind and StopGrace are set here).
	Worker queue.WorkerConfig
	// ItemsBucket, when set, stores items in S3 under items/ (CRAWLQ_ITEMS_BUCKET); else Postgres.
	ItemsBucket string
	// Fetch is the fetcher's base config. The zero value (the Lambda's) refuses every address
	// that is not public, the function's own runtime API on 127.0.0.1:9001 among them; crawlq
	// local sets AllowLoopback with --allow-loopback, to crawl a site on this machine.
	Fetch fetch.Config
	// ProxyEnv fills the ${CRAWLQ_PROXY_...} variables of spiders' proxies (node.Config.ProxyEnv),
	// read by the function's main (envconfig.ProxyEnv). Default none.
	ProxyEnv map[string]string
	// Configure, when set, adjusts each invocation's node before it runs (extra job kinds).
	Configure func(*node.Node)
}

// WorkerResult says what one worker invocation did.
type WorkerResult struct {
	Queue     string `json:"queue"`
	Stopped   string `json:"stopped"` // "deadline", "idle" or "cancelled"
	Claimed   int64  `json:"claimed"`
	Succeeded int64  `json:"succeeded"`
	Failed    int64  `json:"failed"`
	Released  int64  `json:"released"`
	Lost      int64  `json:"lost"`
}

var errNoDeadline = errors.New("worker: the invocation has no deadline")

// Worker returns the worker handler: it works event.Queue (default "crawl") until the deadline
// minus the margin, or until idle; then stops claiming, lets running jobs finish within
// StopGrace, releases what it has not finished, drains the item pipeline and returns, leaving
// nothing leased.
func (d *Deps) Worker(opt WorkerOptions) func(ctx context.Context, ev dispatch.WorkerEvent) (WorkerResult, error) {
	if opt.Margin <= 0 {
		opt.Margin = 20 * time.Second
	}
	if opt.StopGrace <= 0 {
		opt.StopGrace = opt.Margin / 2
	}
	if opt.IdleExit <= 0 {
		opt.IdleExit = 10 * time.Second
	}
	return func(ctx context.Context, ev dispatch.WorkerEvent) (WorkerResult, error) {
		if ev.Queue == "" {
			ev.Queue = spider.DefaultQueue
		}
		res := WorkerResult{Queue: ev.Queue}
		if err := queue.ValidateQueue(ev.Queue); err != nil {
			return res, fmt.Errorf("worker event: %w", err)
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			return res, errNoDeadline
		}
		wc := opt.Worker
		if wc.Kind == "" {
			wc.Kind = dispatch.LambdaKind
		}
		wc.StopGrace = opt.StopGrace
		var sink items.Sink
		if opt.ItemsBucket != "" {
			sink = items.NewS3Sink(s3.NewFromConfig(d.AWS, awsx.S3Options(d.AWS)...), opt.ItemsBucket, "items/")
		}
		// The runs this invocation starts and finishes have their events published at once, and
		// the last ones before it returns, within a quarter of the margin (what the margin leaves
		// after StopGrace and the pipeline's drain); the dispatch tick publishes the rest.
		evs, err := events.NewLoop(events.LoopConfig{Publisher: d.Publisher, Timeout: opt.Margin / 4, Logger: d.Logger})
		if err != nil {
			return res, fmt.Errorf("assemble worker: %w", err)
		}
		n, err := node.New(node.Config{Pool: d.Pool, Spiders: d.Spiders, Queues: []string{ev.Queue}, Worker: wc,
			MaintainEvery: -1, Sink: sink, Events: evs, Fetch: opt.Fetch, ProxyEnv: opt.ProxyEnv, Logger: d.Logger, RunLog: d.RunLog()})
		if err != nil {
			return res, fmt.Errorf("assemble worker: %w", err)
		}
		if opt.Configure != nil {
			opt.Configure(n)
		}
		// Claiming stops at deadline-Margin; the node's own shutdown (grace, release, pipeline
		// drain) then runs on a context that is not yet cancelled.
		workCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(-opt.Margin))
		defer cancel()
		idle := make(chan bool, 1)
		go func() {
			wentIdle := false
			defer func() { idle <- wentIdle }()
			t := time.NewTicker(min(opt.IdleExit/4, time.Second))
			defer t.Stop()
			var last int64 = -1
			quiet := clock.StartStopwatch() // since the worker last claimed or finished a job
			for {
				select {
				case <-workCtx.Done():
					return
				case <-ctx.Done():
					cancel()
					return
				case <-t.C:
				}
				s := n.Stats()
				inFlight := s.Claimed - s.Succeeded - s.Failed - s.Snoozed - s.Released - s.Lost
				if s.Claimed != last || inFlight > 0 {
					last, quiet = s.Claimed, clock.StartStopwatch()
					continue
				}
				if quiet.Elapsed() >= opt.IdleExit {
					wentIdle = true
					cancel()
					return
				}
			}
		}()
		runErr := n.Run(workCtx)
		cancel()
		switch {
		case <-idle:
			res.Stopped = "idle"
		case ctx.Err() != nil:
			res.Stopped = "cancelled"
		default:
			res.Stopped = "deadline"
		}
		s := n.Stats()
		res.Claimed, res.Succeeded, res.Failed, res.Released, res.Lost = s.Claimed, s.Succeeded, s.Failed, s.Released, s.Lost
		if runErr != nil {
			return res, fmt.Errorf("worker: %w", runErr)
		}
		return res, nil
	}
}
