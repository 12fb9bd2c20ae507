// Package runlog owns run logs: the lines a run's command printed (stdout and stderr), kept per
// run so `crawlq logs RUN`, status and the Scrapyd log_url can show them. A Store appends lines
// and reads them from a cursor; Postgres keeps them in crawlq_run_log (the local stack),
// CloudWatch in one log stream per run (AWS). Follow tails a log until its run ends.
package runlog

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
)

// MaxLineBytes bounds one stored line; longer lines are cut (and marked).
const MaxLineBytes = 8 << 10

// Line is one log line. Cursor reads on from after it.
type Line struct {
	Cursor string    `json:"cursor"`
	At     time.Time `json:"at"`
	Text   string    `json:"text"`
}

// Store keeps run logs.
type Store interface {
	// Append adds lines to a run's log, in order.
	Append(ctx context.Context, runID int64, lines []string) error
	// Read returns up to a batch of lines after cursor from ("" for the start) and the cursor
	// to read on from (from itself when there was nothing new).
	Read(ctx context.Context, runID int64, from string) ([]Line, string, error)
}

// clean makes a line storable: valid UTF-8, no NUL (Postgres text refuses it), bounded.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) > MaxLineBytes {
		cut := MaxLineBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + " [truncated]"
	}
	return s
}

// Postgres keeps logs in crawlq_run_log.
type Postgres struct {
	Pool *pgxpool.Pool
	// Batch is the most lines one Read returns. Default 1000.
	Batch int
}

// Append implements Store.
func (p Postgres) Append(ctx context.Context, runID int64, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	cl := make([]string, len(lines))
	for i, l := range lines {
		cl[i] = clean(l)
	}
	if err := dbsqlc.New(p.Pool).AppendRunLog(ctx, dbsqlc.AppendRunLogParams{RunID: runID, Lines: cl}); err != nil {
		return fmt.Errorf("append run %d log: %w", runID, err)
	}
	return nil
}

// Read implements Store.
func (p Postgres) Read(ctx context.Context, runID int64, from string) ([]Line, string, error) {
	var after int64
	if from != "" {
		var err error
		if after, err = strconv.ParseInt(from, 10, 64); err != nil || after < 0 {
			return nil, from, fmt.Errorf("read run %d log: bad cursor %q", runID, from)
		}
	}
	batch := p.Batch
	if batch <= 0 {
		batch = 1000
	}
	rows, err := dbsqlc.New(p.Pool).ReadRunLog(ctx, dbsqlc.ReadRunLogParams{RunID: runID, AfterID: after, MaxLines: int32(min(batch, math.MaxInt32))})
	if err != nil {
		return nil, from, fmt.Errorf("read run %d log: %w", runID, err)
	}
	lines := make([]Line, len(rows))
	for i, r := range rows {
		lines[i] = Line{At: r.At, Text: r.Line, Cursor: strconv.FormatInt(r.ID, 10)}
	}
	if len(lines) > 0 {
		from = lines[len(lines)-1].Cursor
	}
	return lines, from, nil
}

// ReadAll reads a run's whole log from the start, up to max lines (0: no limit).
func ReadAll(ctx context.Context, s Store, runID int64, max int) ([]Line, error) {
	var out []Line
	cur := ""
	for {
		lines, next, err := s.Read(ctx, runID, cur)
		if err != nil {
			return out, err
		}
		out = append(out, lines...)
		if len(lines) == 0 || next == cur || (max > 0 && len(out) >= max) {
			if max > 0 && len(out) > max {
				out = out[:max]
			}
			return out, nil
		}
		cur = next
	}
}

// Follow calls fn for every line of a run's log from cursor from, polling every poll (0: 1s),
// until done reports the run finished and a read after that found nothing new, or ctx ends.
func Follow(ctx context.Context, s Store, runID int64, from string, poll time.Duration, done func(context.Context) (bool, error), fn func(Line) error) error {
	if poll <= 0 {
		poll = time.Second
	}
	for {
		// Ask before reading: lines written before the run finished are then all read below.
		finished, err := done(ctx)
		if err != nil {
			return err
		}
		for {
			lines, next, err := s.Read(ctx, runID, from)
			if err != nil {
				return err
			}
			for _, l := range lines {
				if err := fn(l); err != nil {
					return err
				}
			}
			if len(lines) == 0 || next == from {
				break
			}
			from = next
		}
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
