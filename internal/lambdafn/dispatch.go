package lambdafn

import (
	"context"
	"encoding/json"
	"errors"

	"crawlq/internal/dispatch"
	"crawlq/internal/ecsrun"
	"crawlq/internal/envconfig"
	"crawlq/internal/maintain"
)

// DispatchConfig returns the dispatcher configuration Config describes (WorkerMax, LongMax,
// Maintain, and the run events of Events); invoker starts workers, launcher runner tasks.
func (d *Deps) DispatchConfig(invoker dispatch.Invoker, launcher dispatch.TaskLauncher) (dispatch.Config, error) {
	var mt *maintain.Service
	if d.Config.Dispatch.Maintain != nil {
		mc := *d.Config.Dispatch.Maintain
		mc.Logger = d.Logger
		var err error
		if mt, err = maintain.New(d.Control.Queue, d.Control.Crawler, mc); err != nil {
			return dispatch.Config{}, err
		}
	}
	return dispatch.Config{Queue: d.Control.Queue, Crawler: d.Control.Crawler, Invoker: invoker,
		WorkerFunction: d.Config.Dispatch.WorkerFunction, WorkerMax: d.Config.Dispatch.WorkerMax, Launcher: launcher, LongMax: d.Config.Dispatch.LongMax, Maintain: mt, Logger: d.Logger,
		Events: drainEvents(d.Publisher), PublishRuns: publishRuns(d.Publisher)}, nil
}

// dispatchEvent is the dispatch function's payload: the minute schedule's {"source":"schedule"},
// a deploy's {"source":"deploy"}, or the api's poke, which names the runs it changed.
type dispatchEvent struct {
	Source string  `json:"source"`
	Runs   []int64 `json:"runs,omitempty"`
}

// Dispatch returns the dispatch handler: the api's poke runs Dispatcher.Poke for its runs,
// anything else (a payload that is not JSON too) a full tick.
func Dispatch(dp *dispatch.Dispatcher) func(ctx context.Context, payload json.RawMessage) (dispatch.Result, error) {
	return func(ctx context.Context, payload json.RawMessage) (dispatch.Result, error) {
		var ev dispatchEvent
		if json.Unmarshal(payload, &ev) == nil && ev.Source == dispatch.PokeSource {
			return dp.Poke(ctx, ev.Runs)
		}
		return dp.Tick(ctx)
	}
}

// Crawl runtimes (CRAWLQ_CRAWL_RUNTIME): where the crawl queue's jobs run.
const (
	CrawlOnLambda  = "lambda"  // worker Lambdas (in private subnets, behind NAT)
	CrawlOnFargate = "fargate" // runner tasks (in public subnets: no NAT processing per byte)
)

// RouteCrawlQueue applies Config.Dispatch.CrawlRuntime to a dispatcher configuration. "lambda" leaves the
// crawl queue to worker Lambdas. "fargate" takes it from them and gives it a fleet of runner
// tasks: runners with Queue "crawl" sized by Config.Dispatch.CrawlFleet (see dispatch.Fleet.Burst for its
// Burst).
func (d *Deps) RouteCrawlQueue(cfg *dispatch.Config, runners *ecsrun.Launcher) error {
	switch rt := d.Config.Dispatch.CrawlRuntime; rt {
	case "", CrawlOnLambda:
		return nil
	case CrawlOnFargate:
		if runners == nil {
			return errors.New("CRAWLQ_CRAWL_RUNTIME=fargate needs the ECS runner settings (CRAWLQ_ECS_*)")
		}
		max, conc, burst := d.Config.Dispatch.CrawlFleet.Max, d.Config.Dispatch.CrawlFleet.Concurrency, d.Config.Dispatch.CrawlFleet.Burst
		crawl := *runners
		crawl.Queue, crawl.Concurrency, crawl.Max = "crawl", conc, max
		lq := []string{} // never nil: nil means the default, ["crawl"]
		for _, q := range cfg.LambdaQueues {
			if q != "crawl" {
				lq = append(lq, q)
			}
		}
		cfg.LambdaQueues = lq
		cfg.Fleets = append(cfg.Fleets, dispatch.Fleet{Queue: "crawl", Launcher: &crawl, Max: max, Burst: burst})
		return nil
	default:
		return envconfig.Errorf("CRAWLQ_CRAWL_RUNTIME", "not %s or %s: %q", CrawlOnLambda, CrawlOnFargate, rt)
	}
}
