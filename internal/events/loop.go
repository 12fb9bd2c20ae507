package events

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"crawlq/internal/testwait"
)

// LoopConfig describes a Loop. Publisher is required.
type LoopConfig struct {
	Publisher *Publisher
	// Interval is how often the loop drains the whole outbox by itself (Publisher.Drain, from its
	// start): the fallback for state changes other processes made and for events whose publish
	// failed. Default 0: never; pokes only, for a process beside which something else ticks (a
	// worker Lambda's invocation, with the dispatch function's tick).
	Interval time.Duration
	// Timeout bounds each publish the loop makes, the one Stop makes included. A publish is never
	// cut short by Stop or by the end of Start's context, only by this. Default 30s.
	Timeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Loop publishes run events in the background of a long-running process: those of a run at once
// when the process pokes it (it changed the run's state: Poke after the change commits), the
// whole outbox every Interval, and the poked runs' once more when it stops, so the events of the
// process's last changes do not wait for another process's tick. It follows the house pattern
// of background services: Start is safe to call twice, Stop waits for the loop to end.
type Loop struct {
	// TestSignals are sent as the loop works, for tests to wait on; off unless a test Inits them.
	TestSignals LoopTestSignals

	cfg  LoopConfig
	log  *slog.Logger
	wake chan struct{} // one slot: pokes made while a publish runs coalesce into one more

	mu     sync.Mutex
	poked  map[int64]struct{} // runs changed since the last publish took them
	stop   chan struct{}      // closed by Stop; nil while not running
	done   chan struct{}      // closed when the loop has returned
	runCtx context.Context
}

// LoopTestSignals are what a Loop tells a waiting test (testwait.Signal: off unless Init'ed).
type LoopTestSignals struct {
	// Published is sent after each publish the loop made (a poke's, a tick's or Stop's), with
	// its error: nil when every event it took went out.
	Published testwait.Signal[error]
}

// NewLoop returns a Loop; Start runs it.
func NewLoop(cfg LoopConfig) (*Loop, error) {
	switch {
	case cfg.Publisher == nil:
		return nil, errors.New("events: LoopConfig.Publisher is required")
	case cfg.Interval < 0:
		return nil, errors.New("events: LoopConfig.Interval must not be negative")
	case cfg.Timeout < 0:
		return nil, errors.New("events: LoopConfig.Timeout must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Loop{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), poked: map[int64]struct{}{}}, nil
}

// Poke asks the loop to publish run's events now. It never blocks: the runs poked while a
// publish runs are taken together by the next one, which starts after all of them. A poke
// before Start is kept for it.
func (l *Loop) Poke(run int64) {
	l.mu.Lock()
	l.poked[run] = struct{}{}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a publish is already asked for and has not taken the runs yet
	}
}

// Start runs the loop until ctx ends or Stop is called. A call while it runs does nothing.
func (l *Loop) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		return
	}
	l.stop, l.done, l.runCtx = make(chan struct{}), make(chan struct{}), ctx
	go l.run(ctx, l.stop, l.done)
}

// Stop ends the loop, waits for a publish in progress, then publishes the runs poked since: what
// this process changed until now goes out before it exits. Safe to call without Start, or twice.
func (l *Loop) Stop() {
	l.mu.Lock()
	stop, done, ctx := l.stop, l.done, l.runCtx
	l.stop, l.done, l.runCtx = nil, nil, nil
	l.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	l.publish(ctx, false)
}

func (l *Loop) run(ctx context.Context, stop, done chan struct{}) {
	defer close(done)
	var tick <-chan time.Time
	if l.cfg.Interval > 0 {
		t := time.NewTicker(l.cfg.Interval)
		defer t.Stop()
		tick = t.C
		l.publish(ctx, true)
	}
	for {
		select { // first, so a stopped loop leaves the last pokes to Stop's publish
		case <-ctx.Done():
			return
		case <-stop:
			return
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-l.wake:
			l.publish(ctx, false)
		case <-tick:
			l.publish(ctx, true)
		}
	}
}

// publish publishes the poked runs' events (PublishRuns) or, for a tick, the whole outbox
// (Drain), under ctx's values but not its end: a stopping process lets the publish in progress
// finish, within Timeout, rather than put back events EventBridge may already have taken.
func (l *Loop) publish(ctx context.Context, tick bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Timeout)
	defer cancel()
	var err error
	if tick {
		_, err = l.cfg.Publisher.Drain(ctx)
	} else {
		l.mu.Lock()
		runs := make([]int64, 0, len(l.poked))
		for r := range l.poked {
			runs = append(runs, r)
		}
		clear(l.poked)
		l.mu.Unlock()
		if len(runs) == 0 {
			return
		}
		slices.Sort(runs)
		_, err = l.cfg.Publisher.PublishRuns(ctx, runs)
	}
	if err != nil {
		l.log.Warn("events: run events not published now; the outbox keeps them for the next try", "err", err)
	}
	l.TestSignals.Published.Send(err)
}
