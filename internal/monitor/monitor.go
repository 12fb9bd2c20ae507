// Package monitor owns the judging of a finished run against its spider's monitors
// (spider.Monitors): given the run's figures, its field coverage and the items of the spider's
// previous good runs, it says which monitors passed and which failed, and why. It reads and
// writes nothing; internal/events gathers the facts and stores the verdict.
//
// The verdict never changes the run's state: a run that succeeded and failed a monitor stays
// succeeded, with monitors "failed" beside it (in crawlq run, the api, the run's events and the
// MonitorFailed metric), so its items stay visible and usable while the alarm fires.
package monitor

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"crawlq/internal/spider"
)

// Verdicts of a run as a whole (Report.Status) and statuses of one result.
const (
	// StatusPassed: every monitor passed (or could not be judged: see StatusUnknown).
	StatusPassed = "passed"
	// StatusFailed: at least one monitor failed.
	StatusFailed = "failed"
	// StatusNone: the spider declares no monitors.
	StatusNone = "none"
	// StatusSkipped: the run failed or was cancelled; its state says so already.
	StatusSkipped = "skipped"
	// StatusUnknown (a result only): the facts to judge it are missing (no coverage for items
	// not stored in Postgres, no previous good run for the drift monitor). It does not fail the run.
	StatusUnknown = "unknown"
)

// Facts are what a run is judged by.
type Facts struct {
	// State is the run's final state; only succeeded and incomplete runs are judged.
	State string
	// Items, Pages and Errors are the run's counters.
	Items, Pages, Errors int64
	// ItemsStored is the number of items whose fields were counted into Coverage; nil when the
	// items are not where they can be counted (coverage unknown).
	ItemsStored *int64
	// Coverage maps a field to the items that have it present and non-empty.
	Coverage map[string]int64
	// History holds the items of the spider's previous good runs, newest first (at most
	// ItemsVsMedian.Runs are used): the items each saw, for runs that counted changes.
	History []int64
	// Changes, for a run of a spider that recrawls only what changed (revisit changed_only or
	// adaptive), counts its items new, changed and unchanged against the run before; nil for
	// others. Such a run emits (and Items counts) only its new and changed items, so min_items and
	// items_vs_median judge the items it saw (new, changed and unchanged), and field coverage
	// the items it emitted.
	Changes *Changes
}

// Changes are a run's items by change (urlstate.Counts).
type Changes struct {
	New, Changed, Unchanged int64
}

// seen is the items the run saw, and how to say it.
func (f Facts) seen() (int64, string) {
	if f.Changes == nil {
		return f.Items, fmt.Sprintf("%d items", f.Items)
	}
	c := f.Changes
	n := c.New + c.Changed + c.Unchanged
	return n, fmt.Sprintf("%d items seen (%d new, %d changed, %d unchanged; %d emitted)", n, c.New, c.Changed, c.Unchanged, f.Items)
}

// Result is one monitor's outcome.
type Result struct {
	Monitor   string  `json:"monitor"`         // a spider.Monitor* kind
	Field     string  `json:"field,omitempty"` // field_coverage: the field
	Status    string  `json:"status"`          // passed, failed or unknown
	Value     float64 `json:"value"`           // what was measured (items, a share, a percentage of the median)
	Threshold float64 `json:"threshold"`       // the declared limit
	Message   string  `json:"message"`
}

// Judge evaluates m against f and returns the run's verdict and one result per monitor, in a
// fixed order (kind, then field).
func Judge(m spider.Monitors, f Facts) (string, []Result) {
	if m.Empty() {
		return StatusNone, nil
	}
	if f.State != "succeeded" && f.State != "incomplete" {
		return StatusSkipped, nil
	}
	var out []Result
	items, said := f.seen()
	if m.MinItems != nil {
		r := Result{Monitor: spider.MonitorMinItems, Value: float64(items), Threshold: float64(*m.MinItems), Status: StatusPassed}
		r.Message = fmt.Sprintf("%s, at least %d wanted", said, *m.MinItems)
		if items < *m.MinItems {
			r.Status = StatusFailed
		}
		out = append(out, r)
	}
	if m.MaxErrorRate != nil {
		rate := 0.0
		if n := f.Pages + f.Errors; n > 0 {
			rate = float64(f.Errors) / float64(n)
		}
		r := Result{Monitor: spider.MonitorMaxErrorRate, Value: rate, Threshold: *m.MaxErrorRate, Status: StatusPassed}
		r.Message = fmt.Sprintf("%d errors in %d pages (%.1f%%), at most %.1f%% allowed", f.Errors, f.Pages+f.Errors, 100*rate, 100**m.MaxErrorRate)
		if rate > *m.MaxErrorRate {
			r.Status = StatusFailed
		}
		out = append(out, r)
	}
	fields := make([]string, 0, len(m.FieldCoverage))
	for k := range m.FieldCoverage {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	for _, field := range fields {
		min := m.FieldCoverage[field]
		r := Result{Monitor: spider.MonitorFieldCoverage, Field: field, Threshold: min}
		switch {
		case f.ItemsStored == nil:
			r.Status = StatusUnknown
			r.Message = "coverage unknown: the run's items are not stored in Postgres"
		case *f.ItemsStored == 0 && items > 0:
			// A recrawl that found every item unchanged: no item emitted to count fields in.
			r.Status = StatusUnknown
			r.Message = fmt.Sprintf("coverage unknown: no item new or changed to count %s in (%s)", field, said)
		case *f.ItemsStored == 0:
			r.Status = StatusFailed
			r.Message = fmt.Sprintf("no items, so no %s (at least %.1f%% wanted)", field, 100*min)
		default:
			r.Value = float64(f.Coverage[field]) / float64(*f.ItemsStored)
			r.Status = StatusPassed
			if r.Value < min {
				r.Status = StatusFailed
			}
			r.Message = fmt.Sprintf("%s in %d of %d items (%.1f%%), at least %.1f%% wanted", field, f.Coverage[field], *f.ItemsStored, 100*r.Value, 100*min)
		}
		out = append(out, r)
	}
	if md := m.ItemsVsMedian; md != nil {
		r := Result{Monitor: spider.MonitorItemsVsMedian, Threshold: md.WithinPercent}
		hist := f.History[:min(len(f.History), md.Runs)]
		if len(hist) == 0 {
			r.Status = StatusUnknown
			r.Message = "no previous good run to compare with"
		} else {
			med := Median(hist)
			lo, hi := med*(1-md.WithinPercent/100), med*(1+md.WithinPercent/100)
			if med > 0 {
				r.Value = 100 * float64(items) / med
			}
			r.Status = StatusPassed
			if float64(items) < lo || float64(items) > hi {
				r.Status = StatusFailed
			}
			r.Message = fmt.Sprintf("%s, median of the last %d good runs %s, within %g%% wanted (%s..%s)",
				said, len(hist), num(med), md.WithinPercent, num(math.Max(lo, 0)), num(hi))
		}
		out = append(out, r)
	}
	verdict := StatusPassed
	for _, r := range out {
		if r.Status == StatusFailed {
			verdict = StatusFailed
		}
	}
	return verdict, out
}

// Median returns the median of xs (the mean of the middle two for an even count); 0 for none.
func Median(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return (float64(s[n/2-1]) + float64(s[n/2])) / 2
}

func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
