package local_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/dbtest"
	"crawlq/internal/fetch"
	"crawlq/internal/lambdafn"
	"crawlq/internal/local"
)

// runningStack is a local stack serving until stop.
type runningStack struct {
	st   *local.Stack
	deps *lambdafn.Deps
	addr string // where it serves the Lambda Invoke API
	stop func()
}

// runLocal serves a local stack on url's schema until stop or the end of the test, as crawlq
// local does: tick is Config.Tick, env the environment its dependencies read (nil: run events
// off), and workers may crawl loopback sites.
func runLocal(t *testing.T, url string, env map[string]string, tick time.Duration) *runningStack {
	t.Helper()
	return serveStack(t, url, env, func(c *local.Config) {
		c.Tick, c.WorkerTimeout = tick, 2*time.Minute
		c.Worker.Fetch = fetch.Config{AllowLoopback: true}
	}, nil)
}

// serveStack serves a local stack on url's schema until stop or the end of the test: env is the
// environment its dependencies read (nil: run events off), adjust sets its Config beyond the
// defaults here (workers that leave after 2 s idle, metrics to standard error), and ready, when
// not nil, sees the stack before it serves (to Init its test signals).
func serveStack(t *testing.T, url string, env map[string]string, adjust func(*local.Config), ready func(*local.Stack)) *runningStack {
	t.Helper()
	if env == nil {
		env = map[string]string{"CRAWLQ_EVENT_BUS": lambdafn.EventsOff}
	}
	pool := dbtest.Open(t, url, 16)
	deps, err := lambdafn.NewDeps(pool, aws.Config{Region: "us-east-1"}, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := local.Config{Deps: deps, Worker: lambdafn.WorkerOptions{IdleExit: 2 * time.Second, Margin: time.Second}, Metrics: os.Stderr}
	adjust(&cfg)
	st, err := local.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ready != nil {
		ready(st)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		deps.Control.Pipeline.Close(context.Background())
	}
	t.Cleanup(stop)
	return &runningStack{st: st, deps: deps, addr: ln.Addr().String(), stop: stop}
}
