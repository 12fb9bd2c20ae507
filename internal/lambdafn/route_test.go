package lambdafn_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/ecsrun"
	"crawlq/internal/envconfig"
	"crawlq/internal/lambdafn"
	"crawlq/internal/queue"
)

type countingLauncher struct {
	mu    sync.Mutex
	asked []int
}

func (l *countingLauncher) Launch(_ context.Context, n int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, n)
	return n, nil
}

type refusingInvoker struct{ calls int }

func (r *refusingInvoker) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	r.calls++
	return nil, errors.New("no worker Lambda should start for the crawl queue on fargate")
}

// With CRAWLQ_CRAWL_RUNTIME=fargate the crawl queue's backlog starts runner tasks working
// "crawl" (with the crawl fleet's concurrency and cap) and no worker Lambda; unset, it stays on
// Lambda; anything else is refused, naming the variable.
func TestRouteCrawlQueue(t *testing.T) {
	pool := dbtest.Pool(t)
	env := map[string]string{"CRAWLQ_WORKER_FUNCTION": "x-worker", "CRAWLQ_CRAWL_RUNTIME": "fargate",
		"CRAWLQ_ECS_MAX_TASKS": "3", "CRAWLQ_ECS_CRAWL_MAX_TASKS": "7"}
	d, err := lambdafn.NewDeps(pool, aws.Config{Region: "us-east-1"}, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Control.Pipeline.Close(context.Background()) })
	runners := &ecsrun.Launcher{Cluster: "c", TaskDefinition: "td", Subnets: []string{"s"}, Queue: "long", Concurrency: 6}
	inv := &refusingInvoker{}
	cfg, err := d.DispatchConfig(inv, runners)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RouteCrawlQueue(&cfg, runners); err != nil {
		t.Fatal(err)
	}
	if len(cfg.LambdaQueues) != 0 || cfg.LambdaQueues == nil || len(cfg.Fleets) != 1 {
		t.Fatalf("lambda queues %v, fleets %+v; want none on Lambda and one fleet", cfg.LambdaQueues, cfg.Fleets)
	}
	f := cfg.Fleets[0]
	crawl, ok := f.Launcher.(*ecsrun.Launcher)
	if f.Queue != "crawl" || f.Max != 7 || f.Burst != 0 || !ok || crawl.Queue != "crawl" || crawl.Concurrency != 20 || crawl.Max != 7 {
		t.Fatalf("fleet %+v launcher %+v", f, f.Launcher)
	}
	if runners.Queue != "long" || runners.Concurrency != 6 {
		t.Fatalf("the long-queue launcher changed: %+v", runners)
	}

	// A tick with crawl jobs waiting launches crawl runners, never a worker Lambda.
	fake := &countingLauncher{}
	cfg.Fleets[0].Launcher = fake
	cfg.Launcher = nil
	for i := 0; i < 25; i++ {
		if _, err := d.Control.Queue.Enqueue(context.Background(), queue.EnqueueParams{Queue: "crawl", Kind: "noop"}); err != nil {
			t.Fatal(err)
		}
	}
	dp, err := dispatch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := dp.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inv.calls != 0 || len(fake.asked) != 1 || fake.asked[0] != 3 || res.Launched != 3 {
		t.Fatalf("invoked %d workers, launches asked %v, launched %d; want 0 workers and ceil(25/10)=3 crawl runners", inv.calls, fake.asked, res.Launched)
	}

	reload := func() error {
		var err error
		d.Config, err = lambdafn.LoadConfig(envconfig.Map(env))
		return err
	}
	env["CRAWLQ_CRAWL_LAMBDA_BURST"] = "2"
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	cfgB, err := d.DispatchConfig(inv, runners)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RouteCrawlQueue(&cfgB, runners); err != nil || cfgB.Fleets[0].Burst != 2 {
		t.Fatalf("burst 2: %v, fleets %+v", err, cfgB.Fleets)
	}
	env["CRAWLQ_CRAWL_LAMBDA_BURST"] = "some"
	if err := reload(); err == nil || !strings.Contains(err.Error(), "CRAWLQ_CRAWL_LAMBDA_BURST") {
		t.Fatalf("bad burst: %v", err)
	}
	delete(env, "CRAWLQ_CRAWL_LAMBDA_BURST")

	env["CRAWLQ_CRAWL_RUNTIME"] = "lambda"
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	cfg2, err := d.DispatchConfig(inv, runners)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RouteCrawlQueue(&cfg2, runners); err != nil || cfg2.LambdaQueues != nil || len(cfg2.Fleets) != 0 {
		t.Fatalf("lambda runtime: %v %v %v", err, cfg2.LambdaQueues, cfg2.Fleets)
	}
	env["CRAWLQ_CRAWL_RUNTIME"] = "ec2"
	if err := reload(); err == nil || !strings.Contains(err.Error(), "CRAWLQ_CRAWL_RUNTIME") {
		t.Fatalf("bad runtime: %v", err)
	}
}
