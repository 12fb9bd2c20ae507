package lambdafn_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/api"
	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/lambdafn"
	"crawlq/internal/metrics"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

func deps(t *testing.T) *lambdafn.Deps {
	t.Helper()
	pool := dbtest.Pool(t)
	env := map[string]string{"CRAWLQ_WORKER_FUNCTION": "x-worker", "CRAWLQ_EVENT_BUS": "off"}
	d, err := lambdafn.NewDeps(pool, aws.Config{Region: "us-east-1"}, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Control.Pipeline.Close(context.Background()) })
	return d
}

// TestWorkerDeadline gives the worker handler a short deadline and jobs that never finish by
// themselves: it must stop claiming before the deadline, release everything, and leave nothing
// leased.
func TestWorkerDeadline(t *testing.T) {
	t.Parallel()
	d := deps(t)
	ctx := context.Background()
	for range 30 {
		if _, err := d.Control.Queue.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "block"}); err != nil {
			t.Fatal(err)
		}
	}
	h := d.Worker(lambdafn.WorkerOptions{Margin: time.Second, StopGrace: 200 * time.Millisecond,
		Worker: queue.WorkerConfig{Concurrency: 2, BatchSize: 10},
		Configure: func(n *node.Node) {
			n.Mux.Handle("block", func(ctx context.Context, _ *queue.Job) error { <-ctx.Done(); return ctx.Err() })
		}})
	hctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	res, err := h(hctx, dispatch.WorkerEvent{Queue: "crawl"})
	if err != nil {
		t.Fatal(err)
	}
	if hctx.Err() != nil {
		t.Fatal("the worker returned after its invocation's deadline")
	}
	if res.Stopped != "deadline" || res.Claimed == 0 || res.Succeeded != 0 {
		t.Fatalf("result: %+v", res)
	}
	jobs, err := d.Control.Queue.List(ctx, queue.ListParams{Queue: "crawl", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.State != queue.StateAvailable || j.LeaseUntil != nil && j.State == queue.StateRunning {
			t.Fatalf("job %d left %s", j.ID, j.State)
		}
	}
	if len(jobs) != 30 {
		t.Fatalf("%d jobs, want 30", len(jobs))
	}
	// Without a deadline the handler refuses to start rather than run forever.
	if _, err := h(ctx, dispatch.WorkerEvent{}); err == nil {
		t.Fatal("worker without a deadline started")
	}
	if _, err := h(hctx, dispatch.WorkerEvent{Queue: "Bad Queue!"}); err == nil {
		t.Fatal("worker accepted a bad queue name")
	}
}

// TestWorkerIdleExit: with nothing to do the worker ends well before its deadline.
func TestWorkerIdleExit(t *testing.T) {
	t.Parallel()
	d := deps(t)
	h := d.Worker(lambdafn.WorkerOptions{Margin: time.Second, IdleExit: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := h(ctx, dispatch.WorkerEvent{})
	if err != nil || res.Stopped != "idle" || res.Queue != "crawl" {
		t.Fatalf("idle worker: %+v, %v", res, err)
	}
}

// TestMetricsEMF checks the metrics handler's lines against the EMF specification.
func TestMetricsEMF(t *testing.T) {
	t.Parallel()
	d := deps(t)
	ctx := context.Background()
	for _, q := range []string{"crawl", "long"} {
		if _, err := d.Control.Queue.Enqueue(ctx, queue.EnqueueParams{Queue: q, Kind: "noop"}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	h := d.Metrics(&buf, "crawlq-test")
	res, err := h(ctx, json.RawMessage(`{"source":"schedule"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Queues != 2 {
		t.Fatalf("result %+v, want 2 queues", res)
	}
	sc := bufio.NewScanner(&buf)
	lines := 0
	for sc.Scan() {
		lines++
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		meta := line["_aws"].(map[string]any)
		if ts, ok := meta["Timestamp"].(float64); !ok || ts < float64(time.Now().Add(-time.Minute).UnixMilli()) {
			t.Fatalf("Timestamp: %v", meta["Timestamp"])
		}
		cwm := meta["CloudWatchMetrics"].([]any)
		for _, d := range cwm {
			dir := d.(map[string]any)
			if dir["Namespace"] != "crawlq-test" {
				t.Fatalf("namespace %v", dir["Namespace"])
			}
			dims := dir["Dimensions"].([]any)
			if len(dims) != 1 || len(dims[0].([]any)) != 1 || dims[0].([]any)[0] != metrics.DimQueue {
				t.Fatalf("dimensions %v", dims)
			}
			if q, _ := line[metrics.DimQueue].(string); q != "crawl" && q != "long" {
				t.Fatalf("dimension value %v", line[metrics.DimQueue])
			}
			ms := dir["Metrics"].([]any)
			if len(ms) == 0 || len(ms) > 100 {
				t.Fatalf("%d metrics in a directive", len(ms))
			}
			names := map[string]bool{}
			for _, m := range ms {
				md := m.(map[string]any)
				name := md["Name"].(string)
				names[name] = true
				if u := md["Unit"]; u != metrics.UnitCount && u != metrics.UnitSeconds {
					t.Fatalf("metric %s unit %v", name, u)
				}
				if _, ok := line[name].(float64); !ok {
					t.Fatalf("metric %s has no numeric value in %s", name, sc.Text())
				}
			}
			for _, want := range metrics.QueueMetricNames() {
				if !names[want] {
					t.Fatalf("metric %s missing from %s", want, sc.Text())
				}
			}
			if line[metrics.QueueAvailable] != float64(1) {
				t.Fatalf("QueueAvailable %v", line[metrics.QueueAvailable])
			}
		}
	}
	if lines != 2 {
		t.Fatalf("%d lines, want 2", lines)
	}
}

// TestMetricsBansAndProxyFailures finishes runs whose stats counted bans and proxy failures
// (errors_by_kind "banned" and "proxy", which are retries, not errors): the metrics handler's
// spider lines carry their sums as SpiderBans and SpiderProxyFailures, 0 where a run has none.
func TestMetricsBansAndProxyFailures(t *testing.T) {
	t.Parallel()
	d := deps(t)
	ctx := context.Background()
	for _, r := range []struct{ spider, byKind string }{
		{"shop", `{"banned": 5, "proxy": 2, "timeout": 1}`},
		{"shop", `{"banned": 1}`},
		{"calm", `{}`},
	} {
		if _, err := d.Pool.Exec(ctx, `INSERT INTO crawlq_run (spider, queue, state, finished_at, errors, errors_by_kind)
			VALUES ($1, 'crawl', 'succeeded', now(), 1, $2::jsonb)`, r.spider, r.byKind); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	res, err := d.Metrics(&buf, "crawlq-test")(ctx, json.RawMessage(`{"source":"schedule"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Spiders != 2 {
		t.Fatalf("result %+v, want 2 spiders", res)
	}
	want := map[string][2]float64{"shop": {6, 2}, "calm": {0, 0}}
	got := map[string][2]float64{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		sp, ok := line[metrics.DimSpider].(string)
		if !ok {
			continue
		}
		bans, ok1 := line[metrics.SpiderBans].(float64)
		proxy, ok2 := line[metrics.SpiderProxyFailures].(float64)
		if !ok1 || !ok2 {
			t.Fatalf("spider line without %s and %s: %s", metrics.SpiderBans, metrics.SpiderProxyFailures, sc.Text())
		}
		got[sp] = [2]float64{bans, proxy}
	}
	if len(got) != len(want) || got["shop"] != want["shop"] || got["calm"] != want["calm"] {
		t.Fatalf("bans and proxy failures per spider %v, want %v", got, want)
	}
}

// TestAPIHandler calls the api handler with sample events, as Lambda would.
func TestAPIHandler(t *testing.T) {
	t.Parallel()
	d := deps(t)
	a, err := api.New(d.APIConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	h := lambdafn.API(a)
	out, err := h(context.Background(), json.RawMessage(`{"action":"listspiders"}`))
	if err != nil || !strings.Contains(string(out), `"status":"ok"`) || !strings.Contains(string(out), "demo") {
		t.Fatalf("listspiders: %s, %v", out, err)
	}
	out, err = h(context.Background(), json.RawMessage(`{"action":"addschedule","spider":"demo","cron":"@daily"}`))
	if err != nil || !strings.Contains(string(out), `"status":"error"`) {
		t.Fatalf("addschedule without a scheduler: %s, %v", out, err)
	}
	if w, dp := d.Config.Dispatch.WorkerFunction, d.Config.API.DispatchFunction; w != "x-worker" || dp != "x-dispatch" {
		t.Fatalf("names: worker %q, dispatch %q", w, dp)
	}
}
