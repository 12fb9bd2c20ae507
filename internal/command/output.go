package command

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
)

// streamLogs streams the command's stdout and stderr to the log and the run log, counting
// stdout's lines in stdoutLines; wait for wg before reading the run log's last lines or the count.
func (r *Runner) streamLogs(wg *sync.WaitGroup, p *process, log *slog.Logger, runLog *logBatcher, stdoutLines *atomic.Int64) {
	wg.Add(2)
	go func() { defer wg.Done(); r.streamLog(p.stdout, log, "stdout", runLog, stdoutLines) }()
	go func() { defer wg.Done(); r.streamLog(p.stderr, log, "stderr", runLog, nil) }()
}

// streamLog logs each line of f, bounded to MaxLogLine bytes, and counts them in lines (when
// not nil).
func (r *Runner) streamLog(f *os.File, log *slog.Logger, stream string, runLog *logBatcher, lines *atomic.Int64) {
	br := bufio.NewReaderSize(f, r.cfg.MaxLogLine)
	truncated := false // in the middle of dropping the rest of a long line
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			full := errors.Is(err, bufio.ErrBufferFull)
			if !truncated {
				if lines != nil {
					lines.Add(1)
				}
				text := string(bytes.TrimRight(line, "\r\n"))
				if full {
					log.Info("command output", "stream", stream, "line", text, "truncated", true)
					text += " [truncated]"
				} else {
					log.Info("command output", "stream", stream, "line", text)
				}
				runLog.add(text)
			}
			truncated = full
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if !errors.Is(err, io.EOF) {
				log.Warn("stopped reading command output", "stream", stream, "err", err)
			}
			return
		}
	}
}

// itemsHint is what the run log says of a command (not Scrapy, whose items crawlq collects
// itself) that wrote lines to stdout and no items: a program written for a pipe on stdout, whose
// items would otherwise vanish into the log without a word.
func itemsHint(items, stdoutLines int64) string {
	if items > 0 || stdoutLines == 0 {
		return ""
	}
	return fmt.Sprintf("the command wrote %d lines to stdout and no items: a command spider's items go to file descriptor 3 "+
		"(CRAWLQ_ITEMS_FD; as a path, CRAWLQ_ITEMS_FILE=/dev/fd/3), one JSON object per line; stdout only goes to the log", stdoutLines)
}
