package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/queue"
	"crawlq/internal/spiderstore"
)

// ending is how a command's main process ended.
type ending struct {
	reason  error // why it was stopped (ErrTimeout, ErrStopped, an item write); nil if it ended by itself
	waitErr error // cmd.Wait's
	// grace is how long a stopped command was given to exit, and its items to be written.
	grace time.Duration
	// items is the item reader's result once itemsOver (supervise saw it end first, or
	// awaitItems waited for it).
	items     itemResult
	itemsOver bool
}

// stopPlan is how a command is stopped: the signal, how long it may take before SIGKILL, and
// whether it is a cancel (whose repeats send the signal again).
type stopPlan struct {
	sig     syscall.Signal
	grace   time.Duration
	cancel  bool
	cancels int             // the cancels already seen
	sentAt  clock.Stopwatch // since the stop signal was last sent
}

// signalGap is the least time between two stop signals to a command: the kernel holds one pending
// signal of a kind, so a second sent before the command handled the first is lost (a shell trap
// or Python runs its handler between instructions, late on a loaded machine), and Scrapy would
// not force its shutdown.
const signalGap = 250 * time.Millisecond

// supervise waits for the command's main process to exit. It stops the command (its stop
// signal to its group, SIGKILL after the plan's grace) when ctx ends, the timeout passes or its
// items cannot be written; while a cancelled command shuts down, each further cancel sends its
// signal again.
func (r *Runner) supervise(ctx context.Context, runID int64, p *process, c commandLine, items <-chan itemResult, log *slog.Logger, runLog *logBatcher) ending {
	var (
		end     ending
		plan    stopPlan
		killAt  <-chan time.Time
		poll    <-chan time.Time
		ticker  *time.Ticker
		ctxDone = ctx.Done()
		timer   = time.NewTimer(c.timeout)
	)
	defer timer.Stop()
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	stop := func(why error) {
		if end.reason != nil {
			return
		}
		end.reason = why
		plan = r.stopPlan(ctx, runID, c.scrapy != nil, why, log)
		end.grace = plan.grace
		log.Warn("stopping command", "reason", why, "pid", p.pid, "signal", plan.sig, "grace", plan.grace)
		p.signal(plan.sig)
		plan.sentAt = clock.StartStopwatch()
		runLog.warn("stopping the command (%v): sent %s to pid %d; SIGKILL if it is still running in %s", why, sigName(plan.sig), p.pid, plan.grace)
		killAt = time.After(plan.grace)
		if plan.cancel && r.cfg.Store != nil {
			ticker = time.NewTicker(r.cfg.CancelPoll)
			poll = ticker.C
		}
	}
	for {
		select {
		case end.waitErr = <-p.exited:
			return end
		case <-ctxDone:
			ctxDone = nil
			stop(fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx)))
		case <-timer.C:
			stop(fmt.Errorf("%w after %s", ErrTimeout, c.timeout))
		case end.items = <-items:
			end.itemsOver = true
			items = nil
			if end.items.err != nil {
				stop(fmt.Errorf("write items: %w", end.items.err))
			}
		case <-poll:
			r.repeatCancel(ctx, runID, p, &plan, log, runLog)
		case <-killAt:
			killAt, poll = nil, nil
			log.Warn("command still running after its stop signal; sending SIGKILL", "pid", p.pid, "signal", plan.sig, "grace", plan.grace)
			runLog.error("the command was still running %s after %s: sent SIGKILL to its process group (a hard stop: what it had not written yet is lost)",
				plan.grace, sigName(plan.sig))
			p.signal(syscall.SIGKILL)
		}
	}
}

// stopPlan decides how to stop the command for why. Scrapy gets SIGINT, on which it shuts down
// gracefully, other commands SIGTERM; a cancel sends the signal it asked for. A Scrapy run
// cancelled or timed out gets ShutdownGrace; anything else KillGrace (a stopping worker must
// be done within the ECS stop timeout, and a command whose items cannot be written has nothing
// to save).
func (r *Runner) stopPlan(ctx context.Context, runID int64, scrapy bool, why error, log *slog.Logger) stopPlan {
	plan := stopPlan{sig: syscall.SIGTERM, grace: r.cfg.KillGrace, cancel: errors.Is(why, queue.ErrCancelRequested)}
	if scrapy {
		plan.sig = syscall.SIGINT
		if plan.cancel || errors.Is(why, ErrTimeout) {
			plan.grace = r.cfg.ShutdownGrace
		}
	}
	if plan.cancel && r.cfg.Store != nil {
		req, err := r.readCancel(ctx, runID)
		if err != nil {
			log.Warn("read the cancel's signal; sending the default", "signal", plan.sig, "err", err)
		} else {
			// One signal now for however many cancels came before the command learnt of the
			// first: the next poll sends it again for the rest (two signals at once could reach
			// Scrapy's handler as one).
			plan.cancels = min(req.Count, 1)
			if sig, ok := r.cancelSignal(req, log); ok {
				plan.sig = sig
			}
		}
	}
	return plan
}

// repeatCancel sends the stop signal again when the run was cancelled again since the last
// look, as Scrapyd does at each cancel (Scrapy forces its shutdown at the second).
func (r *Runner) repeatCancel(ctx context.Context, runID int64, p *process, plan *stopPlan, log *slog.Logger, runLog *logBatcher) {
	req, err := r.readCancel(ctx, runID)
	if err != nil {
		log.Warn("read the run's cancels", "err", err)
		return
	}
	if req.Count <= plan.cancels || plan.sentAt.Elapsed() < signalGap {
		return // nothing new, or too soon after the last signal: the next poll looks again
	}
	plan.cancels = req.Count
	if sig, ok := r.cancelSignal(req, log); ok {
		plan.sig = sig
	}
	log.Warn("cancelled again; sending the signal again", "pid", p.pid, "signal", plan.sig, "cancels", req.Count)
	p.signal(plan.sig)
	plan.sentAt = clock.StartStopwatch()
	runLog.warn("cancelled again (cancel %d): sent %s to pid %d again", req.Count, sigName(plan.sig), p.pid)
}

// readCancel reads the run's cancel record; ctx is already done when it is called.
func (r *Runner) readCancel(ctx context.Context, runID int64) (spiderstore.CancelRequest, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return r.cfg.Store.Cancel(ctx, runID)
}

// cancelSignal is the signal a cancel asked for; false for none (or one this system lacks,
// logged: the default goes instead).
func (r *Runner) cancelSignal(req spiderstore.CancelRequest, log *slog.Logger) (syscall.Signal, bool) {
	if req.Signal == "" {
		return 0, false
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		log.Warn("the cancel's signal cannot be sent here; sending the default", "err", err)
		return 0, false
	}
	return sig, true
}

// reap kills whatever the command left running in its group once its main process is gone:
// orphans.
func reap(p *process, log *slog.Logger) {
	if p.signal(syscall.SIGKILL) {
		log.Warn("killed processes the command left running", "pgid", p.pid)
	}
}
