package metrics_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"crawlq/internal/metrics"
)

// validateEMF checks one line against the rules of the CloudWatch Embedded Metric Format
// specification and returns the parsed object.
func validateEMF(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(line, &obj); err != nil {
		t.Fatalf("line is not a JSON object: %v: %s", err, line)
	}
	aws, ok := obj["_aws"].(map[string]any)
	if !ok {
		t.Fatalf("_aws missing or not an object: %s", line)
	}
	ts, ok := aws["Timestamp"].(float64)
	if !ok || ts <= 0 || ts != float64(int64(ts)) {
		t.Fatalf("_aws.Timestamp must be a positive integer of ms, got %v", aws["Timestamp"])
	}
	dirs, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(dirs) == 0 {
		t.Fatalf("_aws.CloudWatchMetrics must be a non-empty array: %s", line)
	}
	for _, d := range dirs {
		dir := d.(map[string]any)
		ns, ok := dir["Namespace"].(string)
		if !ok || ns == "" || len(ns) > 255 {
			t.Fatalf("Namespace must be a 1-255 char string, got %v", dir["Namespace"])
		}
		dimSets, ok := dir["Dimensions"].([]any)
		if !ok {
			t.Fatalf("Dimensions must be an array of arrays")
		}
		for _, ds := range dimSets {
			set := ds.([]any)
			if len(set) > 30 {
				t.Fatalf("dimension set has %d dimensions, max 30", len(set))
			}
			for _, dn := range set {
				name, ok := dn.(string)
				if !ok {
					t.Fatalf("dimension name not a string: %v", dn)
				}
				v, ok := obj[name].(string)
				if !ok || v == "" {
					t.Fatalf("dimension %q must reference a non-empty top-level string, got %v", name, obj[name])
				}
			}
		}
		ms, ok := dir["Metrics"].([]any)
		if !ok || len(ms) == 0 || len(ms) > 100 {
			t.Fatalf("Metrics must hold 1-100 entries, got %v", dir["Metrics"])
		}
		for _, m := range ms {
			md := m.(map[string]any)
			name, ok := md["Name"].(string)
			if !ok || name == "" || len(name) > 1024 {
				t.Fatalf("metric Name invalid: %v", md["Name"])
			}
			if u, ok := md["Unit"]; ok && !slices.Contains([]string{"Count", "Seconds"}, u.(string)) {
				t.Fatalf("metric %s has unexpected unit %v", name, u)
			}
			if _, ok := obj[name].(float64); !ok {
				t.Fatalf("metric %s must have a numeric top-level value, got %#v", name, obj[name])
			}
		}
	}
	return obj
}

func TestWriteValidEMF(t *testing.T) {
	var buf bytes.Buffer
	ts := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	w := metrics.Writer{W: &buf}
	qs := []metrics.QueueStat{
		{Queue: "page", Available: 10, PastDue: 4, Running: 2, Dead: 1, Succeeded: 100, Failed: 3, OldestPastDueAge: 90 * time.Second},
		{Queue: "default"},
	}
	ss := []metrics.SpiderStat{{Spider: "books", Pages: 50, Items: 400, Errors: 2, RunsFinished: 1, RunsFailed: 0, Bans: 7, ProxyFailures: 3}}
	if err := w.Write(ts, qs, ss); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	var lines []map[string]any
	for sc.Scan() {
		lines = append(lines, validateEMF(t, sc.Bytes()))
	}
	if len(lines) != 3 {
		t.Fatalf("want 3 lines (2 queues + 1 spider), got %d", len(lines))
	}
	first := lines[0]
	if first["Queue"] != "page" || first["QueueOldestPastDueAge"] != 90.0 || first["QueueDead"] != 1.0 || first["JobsSucceeded"] != 100.0 {
		t.Fatalf("queue line values wrong: %v", first)
	}
	aws := first["_aws"].(map[string]any)
	if aws["Timestamp"] != float64(ts.UnixMilli()) {
		t.Fatalf("timestamp = %v, want %d", aws["Timestamp"], ts.UnixMilli())
	}
	dir := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if dir["Namespace"] != "crawlq" {
		t.Fatalf("default namespace = %v", dir["Namespace"])
	}
	var got []string
	for _, m := range dir["Metrics"].([]any) {
		got = append(got, m.(map[string]any)["Name"].(string))
	}
	if !slices.Equal(got, metrics.QueueMetricNames()) {
		t.Fatalf("queue metrics %v, want %v", got, metrics.QueueMetricNames())
	}
	sp := lines[2]
	if sp["Spider"] != "books" || sp["SpiderItems"] != 400.0 || sp["SpiderBans"] != 7.0 || sp["SpiderProxyFailures"] != 3.0 {
		t.Fatalf("spider line wrong: %v", sp)
	}
	sdir := sp["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if d := sdir["Dimensions"].([]any)[0].([]any); len(d) != 1 || d[0] != "Spider" {
		t.Fatalf("spider dimensions = %v", d)
	}
}

func TestWriteCustomNamespaceAndEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := (metrics.Writer{Namespace: "other", W: &buf}).Write(time.Now(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("no stats should write nothing, got %q", buf.String())
	}
	if err := (metrics.Writer{Namespace: "other", W: &buf}).Write(time.Now(), []metrics.QueueStat{{Queue: "q"}}, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"Namespace":"other"`) {
		t.Fatalf("namespace not used: %s", buf.String())
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	var buf bytes.Buffer
	w := metrics.Writer{W: &buf}
	err := w.Write(time.Now(), []metrics.QueueStat{{Queue: "ok"}, {Queue: ""}}, nil)
	if !errors.Is(err, metrics.ErrInvalidStat) {
		t.Fatalf("empty queue: err = %v, want ErrInvalidStat", err)
	}
	if err := w.Write(time.Now(), nil, []metrics.SpiderStat{{}}); !errors.Is(err, metrics.ErrInvalidStat) {
		t.Fatalf("empty spider: err = %v, want ErrInvalidStat", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("nothing may be written on error, got %q", buf.String())
	}
	if err := (metrics.Writer{}).Write(time.Now(), nil, nil); err == nil {
		t.Fatal("nil W must be an error")
	}
}

func TestNamesDistinct(t *testing.T) {
	all := append(metrics.QueueMetricNames(), metrics.SpiderMetricNames()...)
	seen := map[string]bool{}
	for _, n := range all {
		if seen[n] || n == "Queue" || n == "Spider" || n == "_aws" {
			t.Fatalf("metric name %q collides", n)
		}
		seen[n] = true
	}
}

// With SpiderTotals, spider lines publish one series per metric (an empty dimension set) and
// monitor lines one per monitor kind, while each line still names its spider for Logs Insights.
func TestSpiderTotals(t *testing.T) {
	var buf bytes.Buffer
	w := metrics.Writer{W: &buf, SpiderTotals: true}
	ts := time.Unix(1_800_000_000, 0)
	if err := w.Write(ts, []metrics.QueueStat{{Queue: "crawl"}}, []metrics.SpiderStat{{Spider: "a", Pages: 3}, {Spider: "b", Pages: 4}}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMonitors(ts, []metrics.MonitorStat{{Spider: "a", Monitor: "min_items", Failed: true}}); err != nil {
		t.Fatal(err)
	}
	var dims []string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		obj := validateEMF(t, sc.Bytes())
		d, _ := json.Marshal(obj["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"])
		dims = append(dims, string(d))
		if _, isQueue := obj["Queue"]; !isQueue && obj["Spider"] == nil {
			t.Errorf("a spider line lost its spider: %s", sc.Text())
		}
	}
	want := []string{`[["Queue"]]`, `[[]]`, `[[]]`, `[["Monitor"]]`}
	if !slices.Equal(dims, want) {
		t.Errorf("dimension sets %v, want %v", dims, want)
	}
}
