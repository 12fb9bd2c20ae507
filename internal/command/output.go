package command

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
)

// streamLogs streams the command's stdout and stderr to the log and the run log; wait for wg
// before reading the run log's last lines.
func (r *Runner) streamLogs(wg *sync.WaitGroup, p *process, log *slog.Logger, runLog *logBatcher) {
	wg.Add(2)
	go func() { defer wg.Done(); r.streamLog(p.stdout, log, "stdout", runLog) }()
	go func() { defer wg.Done(); r.streamLog(p.stderr, log, "stderr", runLog) }()
}

// streamLog logs each line of f, bounded to MaxLogLine bytes.
func (r *Runner) streamLog(f *os.File, log *slog.Logger, stream string, runLog *logBatcher) {
	br := bufio.NewReaderSize(f, r.cfg.MaxLogLine)
	truncated := false // in the middle of dropping the rest of a long line
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			full := errors.Is(err, bufio.ErrBufferFull)
			if !truncated {
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
