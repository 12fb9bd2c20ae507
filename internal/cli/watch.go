package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/events"
	"crawlq/internal/node"
)

// watchRun prints a live line for a run until it finishes (or ctx ends): pages, items, errors,
// queue depth, rate, and an ETA when the run has a page limit. On a terminal the line is
// rewritten in place; elsewhere (a pipe, a log) a line is printed each time the figures change.
// Once the run has ended it prints its verdict and returns what crawlq run --wait would
// (exitFor): with monitors_failed in failOn it waits up to verdictWait for the verdict, else a few
// refreshes.
func watchRun(ctx context.Context, w io.Writer, n *node.Node, id int64, every time.Duration, failOn map[string]bool, verdictWait time.Duration) error {
	r, err := n.Crawler.Get(ctx, id)
	if err != nil {
		return err
	}
	tty := isTerminal(w)
	limit := pageLimit(n, r)
	// Not on a terminal (a log, a pipe): a line when what the run does or waits for changes, every
	// sayAgain, and the last one; not a line per reading of its counters and countdowns.
	var say sayer
	r, err = followRun(ctx, n, r, every, func(r *crawl.Run, waiting, running int64, why string) {
		line := progressLine(r, waiting, running, limit)
		if why != "" {
			line += "  " + why
		}
		switch {
		case tty:
			fmt.Fprint(w, "\r\x1b[K"+line)
		case say.due(line, time.Now()) || r.Finished():
			fmt.Fprintln(w, line)
		}
	})
	if tty {
		fmt.Fprintln(w)
	}
	if err != nil {
		return err
	}
	judged := r.State == crawl.StateSucceeded || r.State == crawl.StateIncomplete
	wait := 3 * every // the verdict is only shown: a few refreshes
	if judged && failOn[outcomeMonitorsFailed] {
		wait = verdictWait // the exit status depends on it
	}
	rep, err := awaitVerdict(ctx, n, r, wait, every)
	if err != nil {
		return err
	}
	printVerdict(w, r, rep, wait)
	if rep == nil && judged && failOn[outcomeMonitorsFailed] {
		if err := notJudged(r, failOn, wait); err != nil {
			return err
		}
	}
	return exitFor(r, rep, failOn)
}

// followRun reads run r again every interval until it finished (or ctx ends), and returns it as it
// ended. It hands see each reading, the first and the last too: the run, its queue's depth while it
// is unfinished, and what it waits for (waitingFor; empty: nothing). crawlq run --watch prints
// every reading, --wait only what the run waits for.
func followRun(ctx context.Context, n *node.Node, r *crawl.Run, every time.Duration, see func(r *crawl.Run, waiting, running int64, why string)) (*crawl.Run, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var waiting, running int64
		var err error
		if !r.Finished() {
			if waiting, running, err = events.Depth(ctx, n.Queue.Pool(), r.ID); err != nil {
				return nil, err
			}
		}
		why, err := waitingFor(ctx, n, r, waiting, running, time.Now())
		if err != nil {
			return nil, err
		}
		see(r, waiting, running, why)
		if r.Finished() {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		if r, err = n.Crawler.Get(ctx, r.ID); err != nil {
			return nil, err
		}
	}
}

// progressLine is the live line. The rate is the run's average since it started; the ETA
// assumes the run goes to its page limit (a crawl that runs out of links ends sooner).
func progressLine(r *crawl.Run, waiting, running int64, limit int) string {
	s := r.Stats
	done := s.Pages + s.Errors
	var b strings.Builder
	fmt.Fprintf(&b, "run %d %s: pages %d", r.ID, r.State, s.Pages)
	if limit > 0 {
		fmt.Fprintf(&b, "/%d", limit)
	}
	fmt.Fprintf(&b, "  items %d  errors %d", s.Items, s.Errors)
	if !r.Finished() {
		fmt.Fprintf(&b, "  queue %d waiting, %d running", waiting, running)
	}
	if s.Duration > 0 {
		rate := float64(done) / s.Duration
		fmt.Fprintf(&b, "  %.1f pages/s", rate)
		if limit > 0 && !r.Finished() && rate > 0 && int64(limit) > done {
			eta := time.Duration(float64(int64(limit)-done) / rate * float64(time.Second))
			fmt.Fprintf(&b, "  ETA %s", eta.Round(time.Second))
		}
	}
	fmt.Fprintf(&b, "  %s", time.Duration(s.Duration*float64(time.Second)).Round(100*time.Millisecond))
	return b.String()
}

// printVerdict says how a finished run was judged, or that it was not within wait.
func printVerdict(w io.Writer, r *crawl.Run, rep *events.Report, wait time.Duration) {
	if rep == nil {
		fmt.Fprintf(w, "run %d %s; monitors not judged yet (waited %s; the next publisher pass judges it)\n", r.ID, r.State, wait.Round(time.Millisecond))
		return
	}
	fmt.Fprintf(w, "run %d %s; monitors %s\n", r.ID, events.Outcome(r.State, rep.Monitors), rep.Monitors)
	for _, res := range rep.Results {
		name := res.Monitor
		if res.Field != "" {
			name += " " + res.Field
		}
		fmt.Fprintf(w, "  %-7s %s: %s\n", res.Status, name, res.Message)
	}
}

// pageLimit is the run's page limit: its own max_pages override, else its spider's (0: none).
func pageLimit(n *node.Node, r *crawl.Run) int {
	if r.Settings.MaxPages != nil {
		return max(*r.Settings.MaxPages, 0)
	}
	if sp, err := n.Spiders.Lookup(r.Spider); err == nil {
		return sp.Settings().MaxPages
	}
	if _, st, ok := n.Spiders.Command(r.Spider); ok {
		return st.MaxPages
	}
	return 0
}
