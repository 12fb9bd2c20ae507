package lambdafn

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"crawlq/internal/events"
	"crawlq/internal/runlog"
)

// EventsOff is the CRAWLQ_EVENT_BUS value that turns publishing run events off (runs are still
// judged against their monitors).
const EventsOff = "off"

// Events returns the run-event publisher Config describes: to the EventBridge bus EventBus
// ("off": not published; file:PATH: JSON Lines appended to PATH, see events.FilePutter), with
// the monitor metrics as EMF lines on metricsOut in MetricsNamespace, and a line per event in the
// run's log.
func (d *Deps) Events(metricsOut io.Writer) (*events.Publisher, error) {
	cfg := events.Config{Pool: d.Pool, Bus: d.Config.EventBus,
		Monitors: d.Spiders.Monitors, Metrics: metricsOut, Namespace: d.Config.MetricsNamespace,
		SpiderTotals: !d.Config.MetricsPerSpider, Logger: d.Logger,
		Log: runlog.EventLog{Store: d.RunLog()}}
	if path, ok := events.FileBus(cfg.Bus); ok {
		fp, err := events.NewFilePutter(path)
		if err != nil {
			return nil, err
		}
		cfg.Putter = fp
	} else if strings.EqualFold(cfg.Bus, EventsOff) {
		cfg.Bus = ""
	} else {
		cfg.Putter = eventbridge.NewFromConfig(d.AWS)
	}
	return events.New(cfg)
}

// promptTimeout bounds the publish the api makes before it answers a schedule, cancel or
// redrive: a slow or failing EventBridge delays the answer by at most this, and what is left
// waits in the outbox for the dispatch tick.
const promptTimeout = 5 * time.Second

// PublishRunEvents publishes the events of a run this invocation changed, within promptTimeout,
// before it returns (a Lambda is frozen once it has). A failure is logged at Warn and not
// returned: it must not fail the invocation, whose change is committed with its events, which
// the dispatch tick publishes later.
func (d *Deps) PublishRunEvents(ctx context.Context, runID int64) {
	ctx, cancel := context.WithTimeout(ctx, promptTimeout)
	defer cancel()
	if _, err := d.Publisher.PublishRuns(ctx, []int64{runID}); err != nil {
		d.Logger.Warn("events: run events not published now; the dispatch tick retries them", "run", runID, "err", err)
	}
}

// publishRuns adapts a publisher to dispatch.Config.PublishRuns.
func publishRuns(p *events.Publisher) func(ctx context.Context, runIDs []int64) (int, error) {
	return func(ctx context.Context, runIDs []int64) (int, error) {
		r, err := p.PublishRuns(ctx, runIDs)
		return r.Published, err
	}
}

// drainEvents adapts a publisher to dispatch.Config.Events.
func drainEvents(p *events.Publisher) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		r, err := p.Drain(ctx)
		return r.Published, err
	}
}
