package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awsx"
	"crawlq/internal/events"
	"crawlq/internal/lambdafn"
	"crawlq/internal/node"
	"crawlq/internal/runlog"
)

// localEventBus picks the event bus of `crawlq local` and `crawlq worker`: the flag, else
// $CRAWLQ_EVENT_BUS, else the emulator's default bus when AWS_ENDPOINT_URL names one, else off (a
// laptop without an emulator has no EventBridge to publish to, and retrying against AWS every
// tick would only fill the log).
func localEventBus(flag string, getenv func(string) string) string {
	switch {
	case flag != "":
		return flag
	case getenv("CRAWLQ_EVENT_BUS") != "":
		return getenv("CRAWLQ_EVENT_BUS")
	case getenv("AWS_ENDPOINT_URL") != "":
		return "default"
	}
	return lambdafn.EventsOff
}

// publishEvents judges finished runs and publishes run events every interval, as the dispatch
// tick does on AWS, until ctx ends or the returned stop is called (which waits for it). Monitor
// metrics go to metricsOut as EMF lines.
func publishEvents(ctx context.Context, pool *pgxpool.Pool, n *node.Node, bus string, every time.Duration, metricsOut io.Writer) (func(), error) {
	cfg := events.Config{Pool: pool, Bus: bus, Monitors: n.Spiders.Monitors, Metrics: metricsOut,
		Log: runlog.EventLog{Store: runlog.Postgres{Pool: pool}}}
	if strings.EqualFold(bus, lambdafn.EventsOff) {
		cfg.Bus = ""
	} else {
		awsCfg, err := awsx.Load(ctx)
		if err != nil {
			return nil, err
		}
		cfg.Putter = eventbridge.NewFromConfig(awsCfg)
	}
	p, err := events.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if _, err := p.Drain(ctx); err != nil && ctx.Err() == nil {
				slog.Error("worker: publish run events", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}
