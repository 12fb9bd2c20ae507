package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/lambdafn"
	"crawlq/internal/local"
	"crawlq/internal/testwait"
)

type stack struct {
	t        *testing.T
	endpoint string
	dir      string
}

func startStack(t *testing.T) (*stack, *demosite.Site, string, *pgxpool.Pool) {
	t.Helper()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatal("the aws CLI is required (pip install awscli): not found on PATH")
	}
	pool := dbtest.Pool(t)
	ctx, cancel := context.WithCancel(context.Background())
	site := demosite.New(demosite.Config{Items: 40, PerPage: 10, SlowDelay: 20 * time.Millisecond})
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Publishing off: there is no EventBridge here (the events are judged and marked done).
	env := map[string]string{"CRAWLQ_EVENT_BUS": lambdafn.EventsOff}
	deps, err := lambdafn.NewDeps(pool, aws.Config{Region: "us-east-1"}, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.New(local.Config{Deps: deps, Tick: time.Second, WorkerTimeout: 2 * time.Minute,
		Worker: lambdafn.WorkerOptions{IdleExit: 2 * time.Second, Margin: time.Second, Fetch: fetch.Config{AllowLoopback: true}}, Metrics: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- st.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		deps.Control.Pipeline.Close(context.Background())
		var leased int
		if err := pool.QueryRow(context.Background(), "select count(*) from crawlq_job where state = 'running'").Scan(&leased); err != nil {
			t.Error(err)
		} else if leased != 0 {
			t.Errorf("%d jobs still leased after the stack stopped", leased)
		}
	})
	return &stack{t: t, endpoint: "http://" + ln.Addr().String(), dir: t.TempDir()}, site, "http://" + addr.String(), pool
}

// invoke runs `aws lambda invoke` and returns the decoded response payload and the CLI's own output.
func (s *stack) invoke(fn, payload string, extra ...string) (map[string]any, map[string]any) {
	s.t.Helper()
	out := filepath.Join(s.dir, "out.json")
	args := append([]string{"lambda", "invoke", "--endpoint-url", s.endpoint, "--function-name", fn, "--payload", payload}, extra...)
	args = append(args, out)
	cmd := exec.Command("aws", args...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_REGION=us-east-1", "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull, "AWS_ENDPOINT_URL=")
	meta, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		s.t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil {
		s.t.Fatalf("aws CLI output %q: %v", meta, err)
	}
	body, err := os.ReadFile(out)
	if err != nil {
		s.t.Fatal(err)
	}
	var r map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &r); err != nil {
			s.t.Fatalf("response %q: %v", body, err)
		}
	}
	return r, m
}

func (s *stack) api(payload string) map[string]any {
	s.t.Helper()
	r, meta := s.invoke("crawlq-api", payload)
	if meta["StatusCode"] != float64(200) || meta["FunctionError"] != nil {
		s.t.Fatalf("invoke %s: %v", payload, meta)
	}
	return r
}

func (s *stack) ok(payload string) map[string]any {
	s.t.Helper()
	r := s.api(payload)
	if r["status"] != "ok" {
		s.t.Fatalf("%s: %v", payload, r)
	}
	return r
}

func (s *stack) waitFinished(id string) map[string]any {
	s.t.Helper()
	st := testwait.For(s.t, "job "+id+" finished", func() (map[string]any, bool) {
		st := s.ok(`{"action":"status","job":"` + id + `"}`)
		return st, st["currstate"] == "finished"
	})
	return st["job"].(map[string]any)
}

// TestAWSCLIAgainstLocal drives `crawlq local` with the real AWS CLI: a demo crawl to the end,
// a cancel, a delayed run that must start on time, and the Invoke API's error answers.
func TestAWSCLIAgainstLocal(t *testing.T) {
	s, site, base, pool := startStack(t)

	out := s.ok(fmt.Sprintf(`{"action":"schedule","spider":"demo","args":{"base_url":%q}}`, base))
	id := out["jobid"].(string)
	job := s.waitFinished(id)
	if job["state"] != "succeeded" {
		t.Fatalf("demo run: %v", job)
	}
	want := site.Expected()
	if got := job["items"]; got != float64(want.Items) {
		t.Fatalf("items: got %v, want %d (job %v)", got, want.Items, job)
	}
	runID, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatalf("job id %q: %v", id, err)
	}
	if n, err := items.CountItems(context.Background(), pool, runID); err != nil || n != int64(want.Items) {
		t.Fatalf("stored items: %d, %v; want %d", n, err, want.Items)
	}
	lj := s.ok(`{"action":"listjobs","spider":"demo"}`)
	fin := lj["finished"].([]any)
	if len(fin) != 1 || fin[0].(map[string]any)["id"] != id {
		t.Fatalf("listjobs finished: %v", lj)
	}
	if st := fin[0].(map[string]any)["stats"].(map[string]any); st["items"] != float64(want.Items) || st["pages"] == float64(0) {
		t.Fatalf("listjobs stats: %v", st)
	}

	// Cancel a run before it starts.
	later := s.ok(fmt.Sprintf(`{"action":"schedule","spider":"demo","args":{"base_url":%q},"delay_seconds":3600}`, base))
	c := s.ok(`{"action":"cancel","job":"` + later["jobid"].(string) + `"}`)
	if c["prevstate"] != "pending" {
		t.Fatalf("cancel: %v", c)
	}
	if job := s.waitFinished(later["jobid"].(string)); job["state"] != "cancelled" {
		t.Fatalf("cancelled run: %v", job)
	}

	// A delayed run starts within a couple of seconds of its time, not at the next minute.
	delayed := s.ok(fmt.Sprintf(`{"action":"schedule","spider":"demo","args":{"base_url":%q},"delay_seconds":4,"settings":{"max_pages":3}}`, base))
	runAt, err := time.Parse(time.RFC3339Nano, delayed["run_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	job = s.waitFinished(delayed["jobid"].(string))
	started, err := time.Parse(time.RFC3339Nano, job["start_time"].(string))
	if err != nil {
		t.Fatalf("start_time of %v: %v", job, err)
	}
	t.Logf("delayed run due %s started %s", runAt.Format(time.StampMilli), started.Format(time.StampMilli))
	if lag := started.Sub(runAt); lag < -50*time.Millisecond || lag > 2*time.Second {
		t.Fatalf("delayed run due %s started %s (lag %s)", runAt, started, lag)
	}

	// Errors come back as the api's answer, and the Invoke API's own errors as AWS's.
	if r := s.api(`{"action":"schedule","spider":"nope"}`); r["status"] != "error" || !strings.Contains(r["message"].(string), "unknown spider") {
		t.Fatalf("unknown spider: %v", r)
	}
	if r := s.api(`{"action":`); r["status"] != "error" {
		t.Fatalf("malformed JSON: %v", r)
	}
	if _, meta := s.invoke("crawlq-dispatch", `{"source":"test"}`, "--invocation-type", "Event"); meta["StatusCode"] != float64(202) {
		t.Fatalf("async invoke: %v", meta)
	}
	cmd := exec.Command("aws", "lambda", "invoke", "--endpoint-url", s.endpoint, "--function-name", "nope", "--payload", "{}", filepath.Join(s.dir, "x"))
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE="+os.DevNull)
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "ResourceNotFoundException") {
		t.Fatalf("unknown function: %v %s", err, b)
	}
}
