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
// Once the run has ended it returns runOutcome of its state, so that --watch exits as --wait does.
func watchRun(ctx context.Context, w io.Writer, n *node.Node, id int64, every time.Duration) error {
	tty := isTerminal(w)
	limit := -1
	last := ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r, err := n.Crawler.Get(ctx, id)
		if err != nil {
			return err
		}
		if limit < 0 {
			limit = pageLimit(n, r)
		}
		var waiting, running int64
		if !r.Finished() {
			if waiting, running, err = events.Depth(ctx, n.Queue.Pool(), id); err != nil {
				return err
			}
		}
		line := progressLine(r, waiting, running, limit)
		switch {
		case tty:
			fmt.Fprint(w, "\r\x1b[K"+line)
		case line != last:
			fmt.Fprintln(w, line)
		}
		last = line
		if r.Finished() {
			if tty {
				fmt.Fprintln(w)
			}
			// The verdict comes with the next publisher pass (a second under crawlq worker, a
			// minute on AWS): wait a few refreshes for it before saying it is not there yet.
			for range 3 {
				judged, err := printVerdict(ctx, w, n, r, false)
				if err != nil {
					return err
				}
				if judged {
					return runOutcome(r.State)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
				}
			}
			if _, err := printVerdict(ctx, w, n, r, true); err != nil {
				return err
			}
			return runOutcome(r.State)
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return ctx.Err()
		case <-t.C:
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

// printVerdict says how a finished run was judged and reports true; when it is not judged yet,
// it says so if last, and reports false.
func printVerdict(ctx context.Context, w io.Writer, n *node.Node, r *crawl.Run, last bool) (bool, error) {
	reps, err := events.Reports(ctx, n.Queue.Pool(), []int64{r.ID})
	if err != nil {
		return false, err
	}
	rep := reps[r.ID]
	if rep == nil {
		if last {
			fmt.Fprintf(w, "run %d %s; monitors not judged yet (the next dispatch tick judges it)\n", r.ID, r.State)
		}
		return false, nil
	}
	fmt.Fprintf(w, "run %d %s; monitors %s\n", r.ID, events.Outcome(r.State, rep.Monitors), rep.Monitors)
	for _, res := range rep.Results {
		name := res.Monitor
		if res.Field != "" {
			name += " " + res.Field
		}
		fmt.Fprintf(w, "  %-7s %s: %s\n", res.Status, name, res.Message)
	}
	return true, nil
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
