package dispatch_test

import (
	"archive/zip"
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// recorder passes invocations to moto's Lambda and keeps each request with moto's answer.
type recorder struct {
	next dispatch.Invoker
	mu   sync.Mutex
	ins  []*lambda.InvokeInput
	outs []*lambda.InvokeOutput
}

func (r *recorder) Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	out, err := r.next.Invoke(ctx, in, opts...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ins = append(r.ins, in)
	r.outs = append(r.outs, out)
	return out, err
}

func (r *recorder) calls() ([]*lambda.InvokeInput, []*lambda.InvokeOutput) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*lambda.InvokeInput(nil), r.ins...), append([]*lambda.InvokeOutput(nil), r.outs...)
}

type launcher struct {
	mu    sync.Mutex
	asked []int
}

func (l *launcher) Launch(_ context.Context, n int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, n)
	return n, nil
}

func motoLambda(t *testing.T) *lambda.Client {
	t.Helper()
	endpoint := awstest.Moto(t)
	// moto runs Lambda code in Docker unless told not to; there is no Docker here, and the test
	// checks the calls dispatch makes, not what the worker does.
	resp, err := http.Post(endpoint+"/moto-api/config", "application/json", strings.NewReader(`{"lambda":{"use_docker":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// moto checks that the function's role exists; the SDK's IAM client is not a dependency,
	// the AWS CLI (which the local tests need anyway) is.
	cmd := exec.Command("aws", "--endpoint-url", endpoint, "iam", "create-role", "--role-name", "crawlq-worker",
		"--assume-role-policy-document", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("aws iam create-role (the aws CLI is required): %v\n%s", err, b)
	}
	cfg := awstest.Config(t)
	lc := lambda.NewFromConfig(cfg)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("bootstrap")
	w.Write([]byte("#!/bin/sh\n"))
	zw.Close()
	_, err = lc.CreateFunction(context.Background(), &lambda.CreateFunctionInput{
		FunctionName: aws.String("crawlq-worker"), Runtime: types.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Role: aws.String("arn:aws:iam::123456789012:role/crawlq-worker"), Code: &types.FunctionCode{ZipFile: buf.Bytes()},
		Architectures: []types.Architecture{types.ArchitectureArm64},
	})
	if err != nil {
		t.Fatalf("create function in moto: %v", err)
	}
	return lc
}

func TestDispatchInvokesWorkersMoto(t *testing.T) {
	lc := motoLambda(t)
	pool := dbtest.Pool(t)
	ctx := context.Background()
	qc := queue.New(pool, queue.Config{})
	rec := &recorder{next: lc}
	ln := &launcher{}

	// A delayed job due in a moment: the tick finds nothing to do at first, waits for it, then
	// starts one worker.
	if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "noop", Delay: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Queue: qc, Invoker: rec, WorkerFunction: "crawlq-worker", WorkerMax: 3, Launcher: ln, LongMax: 2})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	res, err := d.Tick(tctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if res.Waited != 1 || res.Promoted != 1 || res.Invoked["crawl"] != 1 {
		t.Fatalf("tick with a delayed job: %+v", res)
	}
	ins, outs := rec.calls()
	if len(ins) != 1 {
		t.Fatalf("%d invocations, want 1", len(ins))
	}
	for i, in := range ins {
		if aws.ToString(in.FunctionName) != "crawlq-worker" || in.InvocationType != types.InvocationTypeEvent ||
			string(in.Payload) != `{"queue":"crawl"}` {
			t.Fatalf("invocation %d: %s %s %s", i, aws.ToString(in.FunctionName), in.InvocationType, in.Payload)
		}
		if outs[i] == nil || outs[i].StatusCode != 202 {
			t.Fatalf("moto answered invocation %d with %+v", i, outs[i])
		}
	}

	// A backlog: 45 more jobs want 5 workers at 10 each, capped at 3; the long queue's 3 jobs
	// want one runner.
	for range 45 {
		if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "noop"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "long", Kind: "noop"}); err != nil {
			t.Fatal(err)
		}
	}
	d2, err := dispatch.New(dispatch.Config{Queue: qc, Invoker: rec, WorkerFunction: "crawlq-worker", WorkerMax: 3,
		Launcher: ln, LongMax: 2, Lookahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err = d2.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Invoked["crawl"] != 3 || res.Launched != 1 {
		t.Fatalf("tick with a backlog: %+v", res)
	}
	ins, outs = rec.calls()
	if len(ins) != 4 || outs[3].StatusCode != 202 {
		t.Fatalf("invocations: %d", len(ins))
	}
	if len(ln.asked) != 1 || ln.asked[0] != 1 {
		t.Fatalf("launcher asked for %v, want [1]", ln.asked)
	}

	// Live workers count against the cap: with 3 lambda workers heartbeating, nothing more starts.
	wctx, stop := context.WithCancel(ctx)
	block := func(ctx context.Context, _ *queue.Job) error { <-ctx.Done(); return ctx.Err() }
	var wg sync.WaitGroup
	for range 3 {
		w, err := queue.NewWorker(qc, queue.WorkerConfig{Queue: "crawl", Kind: "lambda", Concurrency: 1, BatchSize: 1,
			StopGrace: 10 * time.Millisecond}, block)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(wctx) }()
	}
	testwait.For(t, "3 live lambda workers", func() (map[string]map[string]int, bool) {
		live, err := qc.LiveWorkers(ctx, "crawl", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return live, live["crawl"]["lambda"] == 3
	})
	res, err = d2.Tick(ctx)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Invoked["crawl"] != 0 {
		t.Fatalf("tick with 3 live workers at cap 3 invoked %d", res.Invoked["crawl"])
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	if _, err := dispatch.New(dispatch.Config{}); err == nil || !strings.Contains(err.Error(), "Queue") {
		t.Fatalf("no queue: %v", err)
	}
	qc := queue.New(nil, queue.Config{})
	if _, err := dispatch.New(dispatch.Config{Queue: qc}); err == nil || !strings.Contains(err.Error(), "WorkerFunction") {
		t.Fatalf("no invoker: %v", err)
	}
	if _, err := dispatch.New(dispatch.Config{Queue: qc, LambdaQueues: []string{}, WorkerMax: -1}); err == nil || !strings.Contains(err.Error(), "WorkerMax") {
		t.Fatalf("negative cap: %v", err)
	}
}
