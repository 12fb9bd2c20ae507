// Package metrics owns crawlq's CloudWatch metric vocabulary and the Embedded Metric Format
// (EMF) writer the metrics Lambda uses to publish queue and spider statistics.
//
// The metric names here are a contract: the Terraform dashboard and alarms
// (terraform/modules/observability) refer to them by name, and a test in terraform/ checks
// that both sides agree. Rename a metric here and that test fails until the dashboard follows.
package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultNamespace is the CloudWatch namespace used when Writer.Namespace is empty.
const DefaultNamespace = "crawlq"

// Dimension names: one per kind of line.
const (
	DimQueue  = "Queue"
	DimSpider = "Spider"
)

// Queue metric names.
const (
	QueueAvailable        = "QueueAvailable"
	QueuePastDue          = "QueuePastDue"
	QueueOldestPastDueAge = "QueueOldestPastDueAge"
	QueueRunning          = "QueueRunning"
	QueueDead             = "QueueDead"
	JobsSucceeded         = "JobsSucceeded"
	JobsFailed            = "JobsFailed"
)

// Spider metric names.
const (
	SpiderPages  = "SpiderPages"
	SpiderItems  = "SpiderItems"
	SpiderErrors = "SpiderErrors"
	RunsFinished = "RunsFinished"
	RunsFailed   = "RunsFailed"
	// RunsIncomplete counts runs that ended with dead pages (their items kept; redrive retries them).
	RunsIncomplete = "RunsIncomplete"
	// DeadPages counts pages of finished runs that died after their retries.
	DeadPages = "DeadPages"
	// SpiderBans counts pages a site banned (retried on another session; not errors).
	SpiderBans = "SpiderBans"
	// SpiderProxyFailures counts pages whose proxy failed (retried through another; not errors).
	SpiderProxyFailures = "SpiderProxyFailures"
)

// EMF units crawlq uses.
const (
	UnitCount   = "Count"
	UnitSeconds = "Seconds"
)

// ErrInvalidStat is returned when a stat cannot become a valid EMF line (an empty queue or
// spider name, which would make an empty dimension value).
var ErrInvalidStat = errors.New("invalid stat")

// QueueStat is one queue's state at a moment, as collected from the jobs table.
type QueueStat struct {
	Queue            string
	Available        int64 // jobs ready to run now
	PastDue          int64 // available jobs whose scheduled time has passed
	Running          int64
	Dead             int64 // jobs that exhausted their attempts
	Succeeded        int64 // completed since the previous collection
	Failed           int64 // failed attempts since the previous collection
	OldestPastDueAge time.Duration
}

// SpiderStat is one spider's activity since the previous collection.
type SpiderStat struct {
	Spider         string
	Pages          int64
	Items          int64
	Errors         int64
	RunsFinished   int64 // runs that succeeded
	RunsIncomplete int64
	RunsFailed     int64
	DeadPages      int64
	Bans           int64 // pages the site banned, retried (errors_by_kind "banned")
	ProxyFailures  int64 // pages whose proxy failed, retried (errors_by_kind "proxy")
}

type metricDef struct{ name, unit string }

var queueMetrics = []metricDef{
	{QueueAvailable, UnitCount},
	{QueuePastDue, UnitCount},
	{QueueOldestPastDueAge, UnitSeconds},
	{QueueRunning, UnitCount},
	{QueueDead, UnitCount},
	{JobsSucceeded, UnitCount},
	{JobsFailed, UnitCount},
}

var spiderMetrics = []metricDef{
	{SpiderPages, UnitCount},
	{SpiderItems, UnitCount},
	{SpiderErrors, UnitCount},
	{RunsFinished, UnitCount},
	{RunsFailed, UnitCount},
	{RunsIncomplete, UnitCount},
	{DeadPages, UnitCount},
	{SpiderBans, UnitCount},
	{SpiderProxyFailures, UnitCount},
}

func names(defs []metricDef) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.name
	}
	return out
}

// QueueMetricNames returns the names of the metrics written per queue (dimension "Queue").
func QueueMetricNames() []string { return names(queueMetrics) }

// SpiderMetricNames returns the names of the metrics written per spider (dimension "Spider").
func SpiderMetricNames() []string { return names(spiderMetrics) }

// Writer writes EMF lines; CloudWatch Logs (the Lambda's stdout) turns them into metrics.
type Writer struct {
	Namespace string    // CloudWatch namespace; default "crawlq"
	W         io.Writer // destination, one JSON object per line; required
	// SpiderTotals publishes the spider and monitor metrics without the Spider dimension:
	// CloudWatch sums the spiders' lines into one series per metric (and per monitor kind), so
	// the count of billed metrics no longer grows with the spiders. Each line still names its
	// spider, so CloudWatch Logs Insights can break the totals down. Default false: a series
	// per spider (13 metrics each, $3.90 a month).
	SpiderTotals bool
}

// spiderDims is the dimension sets of a spider line: Spider, or one empty set (EMF's way to
// publish a metric without dimensions: the totals).
func (w Writer) spiderDims() [][]string {
	if w.SpiderTotals {
		return [][]string{{}}
	}
	return [][]string{{DimSpider}}
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// Write emits one EMF line per queue and one per spider, all stamped ts. Nothing is written
// when a stat is invalid, so a bad collection never publishes half a minute of data.
func (w Writer) Write(ts time.Time, qs []QueueStat, ss []SpiderStat) error {
	if w.W == nil {
		return errors.New("write metrics: Writer.W is nil")
	}
	ns := w.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	var buf []byte
	for i, q := range qs {
		if q.Queue == "" {
			return fmt.Errorf("write metrics: queue stat %d: empty Queue: %w", i, ErrInvalidStat)
		}
		vals := []any{q.Available, q.PastDue, q.OldestPastDueAge.Seconds(), q.Running, q.Dead, q.Succeeded, q.Failed}
		line, err := encode(ns, ts, DimQueue, q.Queue, [][]string{{DimQueue}}, queueMetrics, vals)
		if err != nil {
			return fmt.Errorf("write metrics: queue %q: %w", q.Queue, err)
		}
		buf = append(buf, line...)
	}
	for i, s := range ss {
		if s.Spider == "" {
			return fmt.Errorf("write metrics: spider stat %d: empty Spider: %w", i, ErrInvalidStat)
		}
		vals := []any{s.Pages, s.Items, s.Errors, s.RunsFinished, s.RunsFailed, s.RunsIncomplete, s.DeadPages, s.Bans, s.ProxyFailures}
		line, err := encode(ns, ts, DimSpider, s.Spider, w.spiderDims(), spiderMetrics, vals)
		if err != nil {
			return fmt.Errorf("write metrics: spider %q: %w", s.Spider, err)
		}
		buf = append(buf, line...)
	}
	if _, err := w.W.Write(buf); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}

func encode(ns string, ts time.Time, dim, dimValue string, dims [][]string, defs []metricDef, vals []any) ([]byte, error) {
	// Metric values and the dimension live at the top level of the object, beside _aws.
	obj := make(map[string]any, len(defs)+2)
	ms := make([]emfMetric, len(defs))
	for i, d := range defs {
		ms[i] = emfMetric{Name: d.name, Unit: d.unit}
		obj[d.name] = vals[i]
	}
	obj[dim] = dimValue
	obj["_aws"] = emfMeta{
		Timestamp: ts.UnixMilli(),
		CloudWatchMetrics: []emfDirective{{
			Namespace:  ns,
			Dimensions: dims,
			Metrics:    ms,
		}},
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode emf: %w", err)
	}
	return append(b, '\n'), nil
}
