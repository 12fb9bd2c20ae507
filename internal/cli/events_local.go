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
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
)

// localEventBus picks the event bus of `crawlq local`, `crawlq worker` and `crawlq runner`: the
// flag, else $CRAWLQ_EVENT_BUS (the AWS stack sets it for its runners), else the emulator's
// default bus when AWS_ENDPOINT_URL names one, else off (a laptop without an emulator has no
// EventBridge to publish to, and retrying against AWS every tick would only fill the log).
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

// monitorMetricsOut is where a worker or runner writes its monitor metrics, and crawlq local its
// metrics function's (CloudWatch EMF lines): standard output, which CloudWatch reads on ECS and
// Lambda, unless it is a terminal, where a person would read JSON meant for CloudWatch (and take
// it for a crash); it says so on the log.
func monitorMetricsOut(stdout io.Writer, logger *slog.Logger) io.Writer {
	if !isTerminal(stdout) {
		return stdout
	}
	if logger == nil {
		logger = slog.Default()
	}
	logger.Info("metrics (CloudWatch EMF lines) are not printed to a terminal; redirect standard output to keep them (verdicts are in each run's log)")
	return io.Discard
}

// eventLoop returns the loop through which a worker or runner process judges finished runs and
// publishes run events to ev.Bus: at once for each run the process starts or finishes (the node
// pokes it), and every interval for the changes of other processes and the retries, as the
// dispatch tick does on AWS. Monitor metrics go to metricsOut as EMF lines, a line per event to
// the run log, in ev's namespace and form; logger (nil: slog's default) gets the loop's own lines.
func eventLoop(ctx context.Context, pool *pgxpool.Pool, reg *spider.Registry, ev eventEnv, every time.Duration,
	metricsOut io.Writer, log runlog.Store, logger *slog.Logger) (*events.Loop, error) {
	bus := ev.Bus
	cfg := events.Config{Pool: pool, Bus: bus, Monitors: reg.Monitors, Metrics: metricsOut, Log: runlog.EventLog{Store: log}, Logger: logger,
		Namespace: ev.MetricsNamespace, SpiderTotals: !ev.MetricsPerSpider}
	if path, ok := events.FileBus(bus); ok {
		fp, err := events.NewFilePutter(path)
		if err != nil {
			return nil, err
		}
		cfg.Putter = fp
	} else if strings.EqualFold(bus, lambdafn.EventsOff) {
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
	return events.NewLoop(events.LoopConfig{Publisher: p, Interval: every, Logger: logger})
}
