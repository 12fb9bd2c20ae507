package monitor_test

import (
	"testing"

	"crawlq/internal/monitor"
	"crawlq/internal/spider"
)

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }

func TestJudge(t *testing.T) {
	m := spider.Monitors{MinItems: i64(10), MaxErrorRate: f64(0.1), FieldCoverage: map[string]float64{"title": 0.9, "price": 0.5},
		ItemsVsMedian: &spider.MedianMonitor{Runs: 3, WithinPercent: 50}}
	stored := int64(100)
	f := monitor.Facts{State: "succeeded", Items: 100, Pages: 95, Errors: 5, ItemsStored: &stored,
		Coverage: map[string]int64{"title": 90, "price": 49}, History: []int64{100, 90, 110, 1}}
	v, rs := monitor.Judge(m, f)
	got := map[string]string{}
	for _, r := range rs {
		got[r.Monitor+" "+r.Field] = r.Status
	}
	want := map[string]string{"min_items ": "passed", "max_error_rate ": "passed", "field_coverage title": "passed",
		"field_coverage price": "failed", "items_vs_median ": "passed"}
	if v != monitor.StatusFailed || len(got) != len(want) {
		t.Fatalf("verdict %s results %v", v, got)
	}
	for k, s := range want {
		if got[k] != s {
			t.Errorf("%s: %s, want %s", k, got[k], s)
		}
	}
	// 40% of the median (the 4th history entry is beyond runs: 3) fails the drift monitor.
	f.Items = 40
	_, rs = monitor.Judge(spider.Monitors{ItemsVsMedian: m.ItemsVsMedian}, f)
	if rs[0].Status != monitor.StatusFailed || rs[0].Value != 40 {
		t.Fatalf("drift %+v", rs[0])
	}
	f.Items = 50 // the bound itself passes
	if _, rs = monitor.Judge(spider.Monitors{ItemsVsMedian: m.ItemsVsMedian}, f); rs[0].Status != monitor.StatusPassed {
		t.Fatalf("at the bound %+v", rs[0])
	}
	if v, _ := monitor.Judge(spider.Monitors{}, f); v != monitor.StatusNone {
		t.Fatalf("no monitors: %s", v)
	}
	if v, _ := monitor.Judge(m, monitor.Facts{State: "cancelled"}); v != monitor.StatusSkipped {
		t.Fatalf("cancelled: %s", v)
	}
	// Unknown coverage does not fail the run, but says so.
	v, rs = monitor.Judge(spider.Monitors{FieldCoverage: map[string]float64{"title": 1}}, monitor.Facts{State: "succeeded", Items: 5})
	if v != monitor.StatusPassed || rs[0].Status != monitor.StatusUnknown {
		t.Fatalf("unknown coverage: %s %+v", v, rs)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []int64
		want float64
	}{{nil, 0}, {[]int64{3}, 3}, {[]int64{5, 1, 3}, 3}, {[]int64{4, 1, 3, 2}, 2.5}} {
		if got := monitor.Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
