package lambdafn

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/metrics"
)

// Metrics returns the metrics handler: each call writes one EMF line per queue and per spider
// to w (the function's stdout), the spiders' as totals unless Config.MetricsPerSpider. Counters
// that are totals in Postgres (succeeded, dead) are reported as the change since this execution
// environment's previous call (zero on its first).
func (d *Deps) Metrics(w io.Writer, namespace string) func(ctx context.Context, payload json.RawMessage) (MetricsResult, error) {
	mw := metrics.Writer{Namespace: namespace, W: w, SpiderTotals: !d.Config.MetricsPerSpider}
	prevSucceeded, prevDead := map[string]int64{}, map[string]int64{}
	var last time.Time
	var mu sync.Mutex
	return func(ctx context.Context, _ json.RawMessage) (MetricsResult, error) {
		mu.Lock()
		defer mu.Unlock()
		now := clock.Or(d.Clock).Now()
		since := last
		if since.IsZero() {
			since = now.Add(-time.Minute)
		}
		qs, err := d.Control.Queue.Stats(ctx)
		if err != nil {
			return MetricsResult{}, fmt.Errorf("queue stats: %w", err)
		}
		ss, err := d.Control.Crawler.SpiderStats(ctx, since)
		if err != nil {
			return MetricsResult{}, fmt.Errorf("spider stats: %w", err)
		}
		var mq []metrics.QueueStat
		for _, q := range qs {
			st := metrics.QueueStat{Queue: q.Queue, Available: q.Available, PastDue: q.PastDue, Running: q.Running,
				Dead: q.Dead, OldestPastDueAge: q.OldestPastDue}
			if p, ok := prevSucceeded[q.Queue]; ok {
				st.Succeeded = max(q.Succeeded-p, 0)
				st.Failed = max(q.Dead-prevDead[q.Queue], 0)
			}
			mq = append(mq, st)
		}
		var ms []metrics.SpiderStat
		for _, s := range ss {
			ms = append(ms, metrics.SpiderStat{Spider: s.Spider, Pages: s.Pages, Items: s.Items, Errors: s.Errors,
				RunsFinished: s.RunsSucceeded, RunsFailed: s.RunsFailed, RunsIncomplete: s.RunsIncomplete, DeadPages: s.DeadPages,
				Bans: s.Bans, ProxyFailures: s.ProxyFailures})
		}
		if err := mw.Write(now, mq, ms); err != nil {
			return MetricsResult{}, fmt.Errorf("write metrics: %w", err)
		}
		for _, q := range qs {
			prevSucceeded[q.Queue], prevDead[q.Queue] = q.Succeeded, q.Dead
		}
		last = now
		return MetricsResult{Queues: len(mq), Spiders: len(ms)}, nil
	}
}

// MetricsResult says how many EMF lines a metrics call wrote.
type MetricsResult struct {
	Queues  int `json:"queues"`
	Spiders int `json:"spiders"`
}
