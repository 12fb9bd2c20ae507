// Package logtest keeps what code under test logs through log/slog, so a test can check that a
// degraded mode was said once, at the right level, with its error.
package logtest

import (
	"context"
	"log/slog"
	"sync"
)

// Records is a slog.Handler that keeps every record. Safe for concurrent use.
type Records struct {
	mu  sync.Mutex
	got []slog.Record
}

// Enabled keeps every level.
func (h *Records) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r.
func (h *Records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, r.Clone())
	return nil
}

// WithAttrs returns h: the records keep their own attributes only.
func (h *Records) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h.
func (h *Records) WithGroup(string) slog.Handler { return h }

// At returns the lines logged at level: each message, then " err=" and its err attribute when
// it has one.
func (h *Records) At(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.got {
		if r.Level != level {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				line += " err=" + a.Value.String()
			}
			return true
		})
		out = append(out, line)
	}
	return out
}
