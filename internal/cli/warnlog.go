package cli

import (
	"context"
	"log/slog"
)

// warningsOnly is l without its Info and Debug lines: the logger of the node a one-shot command
// (schedule, cancel-run, redrive, run ...) works through. The crawl logs a worker's progress at
// Info ("run finished run=22 state=cancelled"), which in a command's output would only repeat its
// own message; its warnings and errors still show.
func warningsOnly(l *slog.Logger) *slog.Logger { return slog.New(warnHandler{l.Handler()}) }

type warnHandler struct{ slog.Handler }

func (h warnHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && h.Handler.Enabled(ctx, level)
}

func (h warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(attrs)}
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{h.Handler.WithGroup(name)}
}
