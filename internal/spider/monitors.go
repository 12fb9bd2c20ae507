package spider

import (
	"fmt"
	"math"
)

// Monitors are the checks a spider declares on each of its runs (the spec's `monitors:` block),
// judged once when the run ends (internal/events). A zero Monitors declares none. Example:
//
//	monitors:
//	  min_items: 100            # at least 100 items
//	  max_error_rate: 0.05      # errors / (pages + errors) at most 5%
//	  field_coverage:           # share of items with the field present and non-empty
//	    title: 0.99
//	    price: 0.95
//	  items_vs_median:          # items within 50% of the median of the last 5 good runs
//	    runs: 5
//	    within_percent: 50
type Monitors struct {
	// MinItems is the fewest items a run may yield. Default none.
	MinItems *int64 `yaml:"min_items" json:"min_items,omitempty"`
	// MaxErrorRate is the largest share (0..1) of failed pages: errors / (pages + errors). Default none.
	MaxErrorRate *float64 `yaml:"max_error_rate" json:"max_error_rate,omitempty"`
	// FieldCoverage maps a field to the least share (0..1] of items that must have it present
	// and non-empty. Default none.
	FieldCoverage map[string]float64 `yaml:"field_coverage" json:"field_coverage,omitempty"`
	// ItemsVsMedian bounds a run's items around the median of the spider's previous good runs.
	// Default none.
	ItemsVsMedian *MedianMonitor `yaml:"items_vs_median" json:"items_vs_median,omitempty"`
}

// MedianMonitor is the drift monitor: a run's items must be within WithinPercent of the median
// items of the spider's last Runs succeeded runs whose monitors did not fail.
type MedianMonitor struct {
	Runs          int     `yaml:"runs" json:"runs"`                     // 1..100, required
	WithinPercent float64 `yaml:"within_percent" json:"within_percent"` // > 0, required
}

// Monitor kinds, as results and metrics name them.
const (
	MonitorMinItems      = "min_items"
	MonitorMaxErrorRate  = "max_error_rate"
	MonitorFieldCoverage = "field_coverage"
	MonitorItemsVsMedian = "items_vs_median"
)

// MonitorKinds lists every monitor kind.
func MonitorKinds() []string {
	return []string{MonitorMinItems, MonitorMaxErrorRate, MonitorFieldCoverage, MonitorItemsVsMedian}
}

// Empty reports whether no monitor is declared.
func (m Monitors) Empty() bool {
	return m.MinItems == nil && m.MaxErrorRate == nil && len(m.FieldCoverage) == 0 && m.ItemsVsMedian == nil
}

// Validate checks the monitors on their own (no spec to check field names against), as a
// *ValidationError with paths under "monitors.".
func (m Monitors) Validate() error {
	if errs := m.fieldErrors(nil); len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}

// fieldErrors checks the monitors; fields, when not nil, are the item fields the spider extracts,
// and field_coverage may name only those.
func (m Monitors) fieldErrors(fields map[string]bool) []FieldError {
	var errs []FieldError
	add := func(path, format string, a ...any) {
		errs = append(errs, FieldError{Path: "monitors." + path, Msg: fmt.Sprintf(format, a...)})
	}
	if m.MinItems != nil && *m.MinItems < 0 {
		add("min_items", "%d is negative", *m.MinItems)
	}
	if r := m.MaxErrorRate; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		add("max_error_rate", "%v is not a share between 0 and 1", *r)
	}
	for _, f := range sortedKeys(m.FieldCoverage) {
		v := m.FieldCoverage[f]
		path := "field_coverage." + f
		if !fieldNameRE.MatchString(f) {
			add("field_coverage", "field name %q does not match %s", truncate(f), fieldNameRE)
			continue
		}
		if fields != nil && !fields[f] {
			add(path, "%q is not a field of any items rule", f)
		}
		if math.IsNaN(v) || v <= 0 || v > 1 {
			add(path, "%v is not a share above 0 and at most 1 (0.95 is 95%%)", v)
		}
	}
	if md := m.ItemsVsMedian; md != nil {
		if md.Runs < 1 || md.Runs > 100 {
			add("items_vs_median.runs", "%d is not between 1 and 100", md.Runs)
		}
		if math.IsNaN(md.WithinPercent) || md.WithinPercent <= 0 {
			add("items_vs_median.within_percent", "%v is not a percentage above 0", md.WithinPercent)
		}
	}
	return errs
}

// monitorErrors checks a spec's monitors; a declarative spider's field_coverage may name only
// fields its items rules extract.
func (s *Spec) monitorErrors() []FieldError {
	if s.Monitors == nil {
		return nil
	}
	var fields map[string]bool
	if s.kind() == KindDeclarative {
		fields = map[string]bool{}
		for _, it := range s.Items {
			for f := range it.Fields {
				fields[f] = true
			}
		}
	}
	return s.Monitors.fieldErrors(fields)
}

// Monitored is implemented by Go spiders that declare monitors.
type Monitored interface {
	Monitors() Monitors
}

// Monitors returns the monitors that a version of the spider called name declares (version "":
// the spider name resolves to now, as Resolve). A run is judged by the monitors of the version it
// ran: a stored spec's own monitors block, a loaded spec's, or a Go spider's (Monitored). Its
// errors are Resolve's: ErrUnknownSpider or ErrUnknownVersion when no one has that version, else
// the spider store's failure.
func (r *Registry) Monitors(name, version string) (Monitors, error) {
	res, err := r.Resolve(name, version)
	if err != nil {
		return Monitors{}, err
	}
	return res.Monitors, nil
}

// inProcessMonitors returns what an in-process spider declares; the caller holds r.mu.
func (r *Registry) inProcessMonitors(name string) Monitors {
	if m, ok := r.monitors[name]; ok {
		return m
	}
	if s, ok := r.spiders[name].(Monitored); ok {
		return s.Monitors()
	}
	return Monitors{}
}

// setMonitors records a loaded spec's monitors; the caller holds r.mu.
func (r *Registry) setMonitors(name string, m *Monitors) {
	if m == nil || m.Empty() {
		return
	}
	if r.monitors == nil {
		r.monitors = map[string]Monitors{}
	}
	r.monitors[name] = *m
}
