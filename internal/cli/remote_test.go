package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/cli"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/testwait"
)

// `crawlq --api crawlq-api ...` (and CRAWLQ_API) reaches a stack through the Lambda Invoke API of
// a real `crawlq local`, with no database URL on the client's side: schedule, run --wait, runs,
// cancel-run and redrive give what the same commands give on the database.
func TestCommandsThroughTheAPIFunction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, url := dbtest.Schema(t)
	site := demosite.New(demosite.Config{Items: 30, PerPage: 10, SlowDelay: 10 * time.Millisecond})
	siteAddr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	var localOut, localErr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"local", "--addr", "127.0.0.1:0", "--scrapyd-addr", "", "--event-bus", "off", "--allow-loopback", "--worker-idle", "2s"},
			cli.Env{Stdout: &localOut, Stderr: &localErr, Getenv: func(k string) string {
				if k == "DATABASE_URL" {
					return url
				}
				return os.Getenv(k)
			}})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("crawlq local exited %d: %s", code, localErr.String())
		}
	})
	banner := regexp.MustCompile(`Lambda Invoke API on (http://\S+)`)
	endpoint := testwait.For(t, "crawlq local's banner", func() (string, bool) {
		if m := banner.FindStringSubmatch(localErr.String()); m != nil {
			return m[1], true
		}
		select {
		case code := <-done:
			t.Fatalf("crawlq local exited %d: %s", code, localErr.String())
		default:
		}
		return localErr.String(), false
	})

	// The client has AWS credentials and the endpoint, and no database.
	client := map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
	api := func(args ...string) (int, string, string) {
		t.Helper()
		return runWithEnv(t, client, append([]string{"--api", "crawlq-api"}, args...)...)
	}
	code, out, errs := api("schedule", "--spider", "demo", "--arg", "base_url=http://"+siteAddr.String())
	id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if code != 0 || err != nil {
		t.Fatalf("schedule through the api: exit %d, %q %q", code, out, errs)
	}
	code, out, errs = api("run", strconv.FormatInt(id, 10), "--wait", "--verdict-timeout", "1m")
	var remote map[string]any
	if err := json.Unmarshal([]byte(out), &remote); err != nil {
		t.Fatalf("run --wait through the api: exit %d, %q %q", code, out, errs)
	}
	stats, _ := remote["stats"].(map[string]any)
	if remote["state"] != "succeeded" || remote["id"] != float64(id) || remote["spider"] != "demo" || stats["items"] != float64(site.Expected().Items) {
		t.Fatalf("run --wait through the api: exit %d, %v", code, remote)
	}
	// The same run read from the database: the same exit status and the same run, but for the
	// events the api does not answer.
	dbCode, dbOut, dbErrs := run(t, url, "run", strconv.FormatInt(id, 10))
	var local map[string]any
	if err := json.Unmarshal([]byte(dbOut), &local); err != nil {
		t.Fatalf("run on the database: %d %q %q", dbCode, dbOut, dbErrs)
	}
	delete(local, "events")
	if code != dbCode || !jsonEqual(local, remote) {
		t.Errorf("through the api: exit %d %v\non the database: exit %d %v", code, remote, dbCode, local)
	}

	// CRAWLQ_API instead of --api; runs --json and a spider's history.
	env := maps.Clone(client)
	env["CRAWLQ_API"] = "crawlq-api"
	code, out, errs = runWithEnv(t, env, "runs", "--json", "--state", "succeeded")
	var runs []map[string]any
	if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil || len(runs) != 1 || runs[0]["id"] != float64(id) {
		t.Fatalf("runs --json with CRAWLQ_API: exit %d, %q %q", code, out, errs)
	}
	if code, out, errs = runWithEnv(t, env, "runs", "--spider", "demo"); code != 0 || !strings.Contains(out, "MONITORS") || !strings.Contains(out, strconv.FormatInt(id, 10)) {
		t.Errorf("runs --spider with CRAWLQ_API: exit %d, %q %q", code, out, errs)
	}

	// A pending run cancelled through the api ends cancelled: run --wait exits 5.
	code, out, errs = api("schedule", "--spider", "demo", "--delay", "1h", "--key", "later", "--settings", `{"max_pages":7}`, "--arg", "base_url=http://"+siteAddr.String())
	later := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("delayed schedule: exit %d %q", code, errs)
	}
	if code, shown, errs := api("run", later); code != 0 || !strings.Contains(shown, `"max_pages": 7`) {
		t.Errorf("run of a run scheduled with --settings through the api: exit %d, %s %q; want max_pages 7", code, shown, errs)
	}
	if code, _, errs := api("schedule", "--spider", "demo", "--settings", `{"dealy":"1s"}`); code != 2 || !strings.Contains(errs, `did you mean "delay"?`) {
		t.Errorf("schedule --settings with a typo through the api: exit %d, %q; want 2 and the nearest setting", code, errs)
	}
	// The same key again: standard output is the id alone, the duplicate said on standard error.
	if code, out, errs = api("schedule", "--spider", "demo", "--delay", "1h", "--key", "later", "--arg", "base_url=http://"+siteAddr.String()); code != 0 || out != later+"\n" || !strings.Contains(errs, "existing pending run") {
		t.Errorf("schedule with a pending run's key through the api: exit %d, stdout %q, stderr %q; want %s alone and the note on stderr", code, out, errs, later)
	}
	if code, out, errs = api("cancel-run", later); code != 0 || out != "run "+later+": cancel requested (was pending)\n" {
		t.Fatalf("cancel-run through the api: exit %d %q %q", code, out, errs)
	}
	if code, out, errs = api("run", later, "--wait"); code != 5 || !strings.Contains(out, `"state": "cancelled"`) {
		t.Errorf("run --wait of the cancelled run: exit %d %q %q, want 5", code, out, errs)
	}
	// run --watch through the api: a line as the figures change, then the verdict.
	code, out, errs = api("schedule", "--spider", "demo", "--arg", "base_url=http://"+siteAddr.String())
	watched := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("schedule: exit %d %q", code, errs)
	}
	code, out, errs = api("run", watched, "--watch", "--fail-on", "none")
	if want := fmt.Sprintf("run %s succeeded: pages %v  items %d  errors", watched, stats["pages"], site.Expected().Items); code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "monitors") {
		t.Errorf("run --watch through the api: exit %d, %q %q; want a line with %q and the verdict", code, out, errs, want)
	}

	// spider push through the api: stored as on the database, validated here first.
	dir := t.TempDir()
	spec := strings.Replace(requiredCategorySpec, "name: demo-strict", "name: via-api", 1)
	if err := os.WriteFile(filepath.Join(dir, "via-api.yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs = api("spider", "push", filepath.Join(dir, "via-api.yaml")); code != 0 || out != "via-api: pushed version 1 (declarative)\n" {
		t.Errorf("spider push through the api: exit %d %q %q", code, out, errs)
	}
	if code, out, errs = api("spider", "push", dir); code != 0 || out != "via-api: unchanged (version 1)\n" {
		t.Errorf("spider push of a directory through the api: exit %d %q %q", code, out, errs)
	}
	sum := sha256.Sum256([]byte(spec))
	if code, out, _ = run(t, url, "spider", "versions", "via-api"); code != 0 ||
		!regexp.MustCompile(`^VERSION +PUSHED \(UTC\) +SHA256\n1 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +`+hex.EncodeToString(sum[:6])+`\n$`).MatchString(out) {
		t.Errorf("the pushed spider in the database: exit %d %q", code, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("name: bad\nstart_urls: [http://a.example/]\nconcurrency: 999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs = api("spider", "push", dir); code != 1 || out != "" || !strings.Contains(errs, "nothing pushed") || !strings.Contains(errs, "concurrency") {
		t.Errorf("a directory with a bad spec through the api: exit %d %q %q", code, out, errs)
	}

	// The api's refusals come back as errors naming what was wrong, exit 1.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"redrive", "--run", strconv.FormatInt(id, 10)}, "no dead pages to redrive"},
		{[]string{"cancel-run", later}, "already finished"},
		{[]string{"run", "999999"}, "unknown job 999999"},
		{[]string{"schedule", "--spider", "nosuch"}, "nosuch"},
	} {
		if code, _, errs := api(c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%q through the api: exit %d, stderr %q; want 1 and %q", c.args, code, errs, c.want)
		}
	}
	if code, _, errs := runWithEnv(t, client, append([]string{"--api", "crawlq-nope"}, "runs")...); code != 1 || !strings.Contains(errs, "crawlq-nope") {
		t.Errorf("an unknown function: exit %d, stderr %q", code, errs)
	}
	// What the api cannot do is a usage error, before anything is invoked.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--api", "crawlq-api", "stats"}, "works on the database only"},
		{[]string{"--api", "crawlq-api", "run", "1", "--watch", "--interval", "100ms"}, "--interval must be at least 1s"},
		{[]string{"--api", "crawlq-api", "schedule", "--spider", "demo", "--spiders", "x"}, "--spiders does not work through --api"},
		{[]string{"--api", "crawlq-api", "redrive", "--queue", "q", "1"}, "--run RUN_ID"},
		{[]string{"--api", "crawlq-api", "runs", "--database-url", url}, "choose one"},
		{[]string{"--api"}, "--api needs"},
	} {
		if code, _, errs := runWithEnv(t, client, c.args...); code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// lockedBuffer is a buffer one goroutine writes while another reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// jsonEqual compares two decoded JSON values.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
