package spiderstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
)

// cancelSignals are the signal names a cancel takes: the ones Scrapyd's cancel.json passes to
// Twisted by name (HUP, STOP, INT, KILL, TERM), and a few more a spider may handle. Any other
// signal is given by number, as Scrapyd takes it.
var cancelSignals = []string{"HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "STOP"}

// ParseCancelSignal checks the signal a cancel asks for and returns its canonical form: a name
// from cancelSignals without "SIG" (any case, "SIG" optional: "int", "SIGINT" and "INT" are
// "INT"), or a number 1-64. "" stays "" (the runner's default: SIGINT to Scrapy, as Scrapyd's).
func ParseCancelSignal(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return "", fmt.Errorf("%w: signal %d: want 1-64 or one of %s", ErrInvalid, n, strings.Join(cancelSignals, ", "))
		}
		return strconv.Itoa(n), nil
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	for _, ok := range cancelSignals {
		if name == ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w: signal %q: want one of %s, or a number", ErrInvalid, clip(s), strings.Join(cancelSignals, ", "))
}

// CancelRequest is what the cancels of a run asked for.
type CancelRequest struct {
	Signal string // the last cancel's (ParseCancelSignal's form); "": the runner's default
	Count  int    // how many cancels the run has had
}

// RequestCancel records a cancel of a run (spider is its crawlq spider name) with the signal it
// asks for, for the runner of its command, and returns the run's cancels so far. The run's jobs
// are cancelled through the crawl (crawl.Crawler.Cancel); this is what a Scrapyd client's signal
// and a repeated cancel add to it.
func (s *Store) RequestCancel(ctx context.Context, runID int64, spider, signal string) (CancelRequest, error) {
	sig, err := ParseCancelSignal(signal)
	if err != nil {
		return CancelRequest{}, err
	}
	n, err := s.db.RequestSpiderRunCancel(ctx, dbsqlc.RequestSpiderRunCancelParams{RunID: runID, Spider: spider, CancelSignal: sig})
	if err != nil {
		return CancelRequest{}, fmt.Errorf("record cancel of run %d: %w", runID, err)
	}
	return CancelRequest{Signal: sig, Count: int(n)}, nil
}

// Cancel reads what the cancels of a run asked for: a zero CancelRequest when there were none.
func (s *Store) Cancel(ctx context.Context, runID int64) (CancelRequest, error) {
	row, err := s.db.SpiderRunCancel(ctx, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return CancelRequest{}, nil
	}
	if err != nil {
		return CancelRequest{}, fmt.Errorf("read cancel of run %d: %w", runID, err)
	}
	return CancelRequest{Signal: row.CancelSignal, Count: int(row.Cancels)}, nil
}
