package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/events"
	"crawlq/internal/node"
	"crawlq/internal/view"
)

// withReports shows runs with their reports.
func withReports(ctx context.Context, n *node.Node, runs []*crawl.Run) ([]view.Run, error) {
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	reps, err := events.Reports(ctx, n.Queue.Pool(), ids)
	if err != nil {
		return nil, err
	}
	out := make([]view.Run, len(runs))
	for i, r := range runs {
		out[i] = view.NewRun(r, reps[r.ID])
	}
	return out, nil
}

// listRuns lists runs as p asks, with their reports. p.States may hold the outcome
// monitors_failed besides the run states: a succeeded or incomplete run judged with a failed
// monitor, a verdict kept in the run's report, not its state, so those are read page by page
// until p.Limit of them are found.
func listRuns(ctx context.Context, n *node.Node, p crawl.ListParams) ([]view.Run, error) {
	if !slices.Contains(p.States, outcomeMonitorsFailed) {
		runs, err := n.Crawler.List(ctx, p)
		if err != nil {
			return nil, err
		}
		return withReports(ctx, n, runs)
	}
	limit := p.Limit
	if limit == 0 {
		limit = 100
	}
	var asked []string // states asked for besides the outcome
	for _, s := range p.States {
		if s != outcomeMonitorsFailed {
			asked = append(asked, s)
		}
	}
	q := p
	q.States = slices.Concat(asked, []string{crawl.StateSucceeded, crawl.StateIncomplete})
	q.Limit = 1000
	var out []view.Run
	for {
		runs, err := n.Crawler.List(ctx, q)
		if err != nil {
			return nil, err
		}
		views, err := withReports(ctx, n, runs)
		if err != nil {
			return nil, err
		}
		for _, v := range views {
			if v.Outcome == outcomeMonitorsFailed || slices.Contains(asked, v.State) {
				out = append(out, v)
				if len(out) == limit {
					return out, nil
				}
			}
		}
		if len(runs) < q.Limit {
			return out, nil
		}
		q.Before = runs[len(runs)-1].ID
	}
}

// stateShown is a run's state as runs prints it: with "(monitors failed)" for a run whose outcome
// is monitors_failed, which its state alone (succeeded, incomplete) does not say.
func stateShown(r view.Run) string {
	if r.Outcome == outcomeMonitorsFailed {
		return r.State + " (monitors failed)"
	}
	return r.State
}

// printHistory prints one spider's runs, newest first, each succeeded run with its figures and
// their change against the succeeded run before it. A cancelled or failed run stopped part way, so
// a change against it (or of it) would measure the stop, not the site: such a run shows its
// figures alone, and the next succeeded run is compared with the last one that succeeded.
func printHistory(w io.Writer, runs []view.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tMONITORS\tPAGES\tITEMS\tERRORS\tRETRIES\tMB\tSECONDS\tCOVERAGE\tCREATED")
	for i, r := range runs {
		prev := lastSucceeded(runs[i+1:])
		mons, cov := "-", "-"
		if r.Report != nil {
			mons = r.Report.Monitors
			if failed := failedMonitors(r.Report); failed != "" {
				mons += " (" + failed + ")"
			}
			cov = coverageLine(r.Report)
		}
		s := r.Stats
		col := func(v int64, pv func(*view.Run) int64) string {
			if prev == nil || r.State != "succeeded" {
				return fmt.Sprint(v)
			}
			return fmt.Sprintf("%d (%s)", v, change(v, pv(prev)))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\n", r.ID, r.State, mons,
			col(s.Pages, func(p *view.Run) int64 { return p.Stats.Pages }),
			col(s.Items, func(p *view.Run) int64 { return p.Stats.Items }),
			col(s.Errors, func(p *view.Run) int64 { return p.Stats.Errors }),
			col(s.Retries, func(p *view.Run) int64 { return p.Stats.Retries }),
			float64(s.Bytes)/1e6, s.DurationSeconds, cov, r.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// lastSucceeded is the newest succeeded run of older, which is newest first.
func lastSucceeded(older []view.Run) *view.Run {
	for i := range older {
		if older[i].State == "succeeded" {
			return &older[i]
		}
	}
	return nil
}

// change says how v differs from was: "=", "+12%", "-60%", or "+5" when was is 0.
func change(v, was int64) string {
	switch {
	case v == was:
		return "="
	case was == 0:
		return fmt.Sprintf("%+d", v)
	}
	return fmt.Sprintf("%+.0f%%", 100*float64(v-was)/float64(was))
}

func failedMonitors(rep *events.Report) string {
	var out []string
	for _, r := range rep.Results {
		if r.Status == "failed" {
			name := r.Monitor
			if r.Field != "" {
				name += ":" + r.Field
			}
			out = append(out, name)
		}
	}
	return strings.Join(out, ",")
}

// coverageLine shows each field's share of the run's stored items, lowest first.
func coverageLine(rep *events.Report) string {
	if rep.ItemsStored == nil {
		return "unknown"
	}
	if *rep.ItemsStored == 0 || len(rep.Coverage) == 0 {
		return "-"
	}
	type fc struct {
		f string
		p float64
	}
	var fs []fc
	for f, n := range rep.Coverage {
		fs = append(fs, fc{f, 100 * float64(n) / float64(*rep.ItemsStored)})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].p < fs[j].p || (fs[i].p == fs[j].p && fs[i].f < fs[j].f) })
	parts := make([]string, len(fs))
	for i, x := range fs {
		parts[i] = fmt.Sprintf("%s=%.0f%%", x.f, x.p)
	}
	return strings.Join(parts, " ")
}
