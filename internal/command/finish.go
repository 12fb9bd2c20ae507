package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"

	"crawlq/internal/crawl"
	"crawlq/internal/queue"
)

// finish maps how the command ended (and, for Scrapy, its final stats) to the job's fate: the
// run's last step, after its items are written or given up.
func (r *Runner) finish(ctx context.Context, run *crawl.Run, log *slog.Logger, runLog *logBatcher, sr *scrapyRun, end ending) error {
	reason, ires, waitErr := end.reason, end.items, end.waitErr
	var scrapyErr error
	if sr != nil {
		st, err := readScrapyStats(sr.statsFile)
		switch {
		case err == nil:
			runLog.info("scrapy stats: item_scraped_count=%d response_count=%d log_count/ERROR=%d spider_exceptions=%d finish_reason=%s",
				st.Items, st.Responses, st.ErrorLogs, st.SpiderExceptions, st.FinishReason)
			if r.cfg.RecordStats != nil {
				if err := r.cfg.RecordStats(context.WithoutCancel(ctx), run.ID, st.Responses, st.ByKind); err != nil {
					log.Warn("record scrapy stats", "err", err)
				}
			}
			scrapyErr = st.verdict()
		case errors.Is(err, os.ErrNotExist):
			scrapyErr = fmt.Errorf("%w: scrapy wrote no final stats (it did not start the crawl, or STATS_CLASS was overridden)", ErrSpiderErrors)
		default:
			scrapyErr = err
		}
	}

	switch {
	case reason != nil && errors.Is(reason, ErrTimeout):
		log.Warn("command timed out")
		return queue.Permanent(reason)
	case reason != nil:
		log.Warn("command stopped", "reason", reason)
		return reason
	case ires.err != nil:
		log.Warn("command items not written", "err", ires.err)
		return fmt.Errorf("write items: %w", ires.err)
	}
	if waitErr == nil {
		if scrapyErr != nil {
			log.Warn("scrapy run had errors", "err", scrapyErr)
			return queue.Permanent(scrapyErr)
		}
		log.Info("command succeeded")
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		return fmt.Errorf("wait for command: %w", waitErr)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		log.Warn("command killed by a signal", "signal", ws.Signal())
		return fmt.Errorf("%w: killed by signal %s", ErrExitStatus, ws.Signal())
	}
	code := ee.ExitCode()
	if code == ExitTempFail {
		log.Warn("command asked for a retry", "exit_status", code)
		return fmt.Errorf("%w: exit status %d (temporary failure; retried)", ErrExitStatus, code)
	}
	log.Warn("command failed", "exit_status", code)
	return queue.Permanent(fmt.Errorf("%w: exit status %d", ErrExitStatus, code))
}
