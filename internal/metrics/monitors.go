package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Monitor metrics: written once per judged monitor when a run ends (by the run-event publisher,
// internal/events), not by the metrics function. Each line carries two dimension sets, so one
// CloudWatch alarm per monitor kind (dimension Monitor alone) covers every spider, and a spider's
// own graph (Spider and Monitor) is there too.
const (
	DimMonitor = "Monitor"
	// MonitorFailed is 1 for a monitor that failed on a run, 0 for one that passed (a monitor
	// that could not be judged writes nothing).
	MonitorFailed = "MonitorFailed"
)

// MonitorMetricNames returns the names of the monitor metrics (dimensions Spider+Monitor and Monitor).
func MonitorMetricNames() []string { return []string{MonitorFailed} }

// MonitorStat is one monitor's outcome on one run.
type MonitorStat struct {
	Spider  string
	Monitor string // a monitor kind: min_items, max_error_rate, field_coverage, items_vs_median
	Failed  bool
}

// monitorDims: per spider and monitor kind, and per kind (the alarms'); only per kind with
// SpiderTotals.
func (w Writer) monitorDims() [][]string {
	if w.SpiderTotals {
		return [][]string{{DimMonitor}}
	}
	return [][]string{{DimSpider, DimMonitor}, {DimMonitor}}
}

// WriteMonitors emits one EMF line per monitor outcome, stamped ts. Nothing is written when a
// stat is invalid.
func (w Writer) WriteMonitors(ts time.Time, ms []MonitorStat) error {
	if w.W == nil {
		return errors.New("write monitor metrics: Writer.W is nil")
	}
	ns := w.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	var buf []byte
	for i, m := range ms {
		if m.Spider == "" || m.Monitor == "" {
			return fmt.Errorf("write monitor metrics: stat %d: empty Spider or Monitor: %w", i, ErrInvalidStat)
		}
		v := 0
		if m.Failed {
			v = 1
		}
		b, err := json.Marshal(map[string]any{
			DimSpider: m.Spider, DimMonitor: m.Monitor, MonitorFailed: v,
			"_aws": emfMeta{Timestamp: ts.UnixMilli(), CloudWatchMetrics: []emfDirective{{
				Namespace:  ns,
				Dimensions: w.monitorDims(),
				Metrics:    []emfMetric{{Name: MonitorFailed, Unit: UnitCount}},
			}}},
		})
		if err != nil {
			return fmt.Errorf("write monitor metrics: %w", err)
		}
		buf = append(append(buf, b...), '\n')
	}
	if len(buf) == 0 {
		return nil
	}
	if _, err := w.W.Write(buf); err != nil {
		return fmt.Errorf("write monitor metrics: %w", err)
	}
	return nil
}
