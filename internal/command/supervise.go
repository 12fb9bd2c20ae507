package command

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"time"
)

// ending is how a command's main process ended.
type ending struct {
	reason  error // why it was stopped (ErrTimeout, ErrStopped, an item write); nil if it ended by itself
	waitErr error // cmd.Wait's
	// items is the item reader's result once itemsOver (supervise saw it end first, or
	// awaitItems waited for it).
	items     itemResult
	itemsOver bool
}

// supervise waits for the command's main process to exit. It stops the command (SIGTERM to its
// group, SIGKILL after the kill grace) when ctx ends, the timeout passes or its items cannot be
// written.
func (r *Runner) supervise(ctx context.Context, p *process, timeout time.Duration, items <-chan itemResult, log *slog.Logger) ending {
	var (
		end     ending
		killAt  <-chan time.Time
		ctxDone = ctx.Done()
		timer   = time.NewTimer(timeout)
	)
	defer timer.Stop()
	terminate := func(why error) {
		if end.reason != nil {
			return
		}
		end.reason = why
		log.Warn("stopping command", "reason", why, "pid", p.pid)
		p.signal(syscall.SIGTERM)
		killAt = time.After(r.cfg.KillGrace)
	}
	for {
		select {
		case end.waitErr = <-p.exited:
			return end
		case <-ctxDone:
			ctxDone = nil
			terminate(fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx)))
		case <-timer.C:
			terminate(fmt.Errorf("%w after %s", ErrTimeout, timeout))
		case end.items = <-items:
			end.itemsOver = true
			items = nil
			if end.items.err != nil {
				terminate(fmt.Errorf("write items: %w", end.items.err))
			}
		case <-killAt:
			killAt = nil
			log.Warn("command ignored SIGTERM; sending SIGKILL", "pid", p.pid, "grace", r.cfg.KillGrace)
			p.signal(syscall.SIGKILL)
		}
	}
}

// reap kills whatever the command left running in its group once its main process is gone:
// orphans.
func reap(p *process, log *slog.Logger) {
	if p.signal(syscall.SIGKILL) {
		log.Warn("killed processes the command left running", "pgid", p.pid)
	}
}
