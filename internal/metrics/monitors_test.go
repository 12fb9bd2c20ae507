package metrics_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"crawlq/internal/metrics"
)

func TestWriteMonitors(t *testing.T) {
	var buf bytes.Buffer
	w := metrics.Writer{W: &buf}
	err := w.WriteMonitors(time.UnixMilli(1700000000000), []metrics.MonitorStat{
		{Spider: "shop", Monitor: "min_items", Failed: true}, {Spider: "shop", Monitor: "field_coverage"}})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	obj := validateEMF(t, []byte(lines[0]))
	if obj["Spider"] != "shop" || obj["Monitor"] != "min_items" || obj[metrics.MonitorFailed] != float64(1) {
		t.Fatalf("line %s", lines[0])
	}
	if !strings.Contains(lines[0], `"Dimensions":[["Spider","Monitor"],["Monitor"]]`) {
		t.Fatalf("want per-spider and per-kind dimension sets: %s", lines[0])
	}
	if obj := validateEMF(t, []byte(lines[1])); obj[metrics.MonitorFailed] != float64(0) {
		t.Fatalf("passed monitor: %s", lines[1])
	}
	buf.Reset()
	err = w.WriteMonitors(time.Now(), []metrics.MonitorStat{{Spider: "shop", Monitor: "min_items"}, {Spider: "", Monitor: "x"}})
	if !errors.Is(err, metrics.ErrInvalidStat) || buf.Len() != 0 {
		t.Fatalf("invalid stat: %v, wrote %q", err, buf.String())
	}
}
