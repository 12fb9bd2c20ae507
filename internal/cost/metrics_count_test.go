package cost_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"crawlq/internal/cost"
	"crawlq/internal/metrics"
	"crawlq/internal/spider"
)

// CloudWatch bills each distinct (namespace, metric, dimension names and values) series a
// month. Count the series in what the metrics function (Writer.Write, one line per queue and
// per spider) and the run-event publishers (WriteMonitors, one line per judged monitor) really
// emit for every queue, spider and monitor kind, and hold CustomMetrics to it.
func TestCustomMetricsCountsWhatIsEmitted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		queues, spiders int
		perSpider       bool
	}{{2, 10, true}, {1, 1, true}, {3, 40, true}, {2, 10, false}, {3, 40, false}} {
		var buf bytes.Buffer
		w := metrics.Writer{W: &buf, SpiderTotals: !c.perSpider}
		var qs []metrics.QueueStat
		for i := range c.queues {
			qs = append(qs, metrics.QueueStat{Queue: fmt.Sprintf("q%d", i)})
		}
		var ss []metrics.SpiderStat
		var ms []metrics.MonitorStat
		for i := range c.spiders {
			ss = append(ss, metrics.SpiderStat{Spider: fmt.Sprintf("s%d", i)})
			for _, k := range spider.MonitorKinds() {
				ms = append(ms, metrics.MonitorStat{Spider: fmt.Sprintf("s%d", i), Monitor: k, Failed: i%2 == 0})
			}
		}
		ts := time.Unix(1_800_000_000, 0)
		if err := w.Write(ts, qs, ss); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMonitors(ts, ms); err != nil {
			t.Fatal(err)
		}
		series := map[string]bool{}
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("EMF line %q: %v", sc.Text(), err)
			}
			var meta struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			}
			raw, _ := json.Marshal(line["_aws"])
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			for _, d := range meta.CloudWatchMetrics {
				for _, dims := range d.Dimensions {
					var kv []string
					for _, name := range dims {
						kv = append(kv, fmt.Sprintf("%s=%v", name, line[name]))
					}
					slices.Sort(kv)
					for _, m := range d.Metrics {
						series[d.Namespace+"|"+m.Name+"|"+strings.Join(kv, ",")] = true
					}
				}
			}
		}
		if got, want := cost.CustomMetrics(c.queues, c.spiders, c.perSpider), len(series); got != want {
			t.Errorf("%d queues, %d spiders, per spider %v: CustomMetrics = %d, the writers emit %d series", c.queues, c.spiders, c.perSpider, got, want)
		}
	}
}
