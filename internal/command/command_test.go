package command_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/command"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

// script writes an sh script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type env struct {
	node *node.Node
	dir  string
}

// start assembles a node working the "long" queue with the given command spiders, whose
// command runner is a command.Runner with cfg (Pipeline and RecordItems filled in).
func start(t *testing.T, specs map[string]spider.CommandSpec, cfg command.Config, pl items.Config) *env {
	t.Helper()
	return startWith(t, specs, &cfg, pl, nil)
}

// startWith is start with a hook that completes the command config once the node exists.
func startWith(t *testing.T, specs map[string]spider.CommandSpec, cfgp *command.Config, pl items.Config, hook func(*env, *command.Config)) *env {
	t.Helper()
	cfg := *cfgp
	if cfg.Env == nil {
		cfg.Env = command.Inherited(os.LookupEnv, command.DefaultInheritEnv)
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatal("these tests need /bin/sh")
	}
	pool := dbtest.Pool(t)
	reg := spider.NewRegistry()
	for name, spec := range specs {
		st := spider.DefaultSettings()
		st.Runtime = spider.RuntimeECS
		if err := reg.RegisterCommand(name, st, spec); err != nil {
			t.Fatal(err)
		}
	}
	n, err := node.New(node.Config{Pool: pool, Spiders: reg, Queues: []string{"long"}, MaintainEvery: 100 * time.Millisecond,
		Pipeline: pl, Worker: queue.WorkerConfig{Kind: "ecs", Concurrency: 4, Lease: 5 * time.Second, StopGrace: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pipeline = n.Pipeline
	cfg.RecordItems = n.Crawler.RecordItems
	e := &env{node: n, dir: t.TempDir()}
	if hook != nil {
		hook(e, &cfg)
	}
	r, err := command.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Crawler.SetCommandRunner(r.Run)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	return e
}

func (e *env) schedule(t *testing.T, name string, args map[string]string) int64 {
	t.Helper()
	s, err := e.node.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: name, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	return s.RunID
}

// wait waits for run id to finish and returns it.
func (e *env) wait(t *testing.T, id int64) *crawl.Run {
	t.Helper()
	return testwait.For(t, fmt.Sprintf("run %d finished", id), func() (*crawl.Run, bool) {
		r, err := e.node.Crawler.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r, r.Finished()
	})
}

// waitFile waits for a file the script writes and returns its trimmed content.
func waitFile(t *testing.T, p string) string {
	t.Helper()
	return testwait.For(t, p+" written", func() (string, bool) {
		b, err := os.ReadFile(p)
		return strings.TrimSpace(string(b)), err == nil && strings.HasSuffix(string(b), "\n")
	})
}

func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	// The kill is synchronous, but the kernel tears processes down asynchronously.
	testwait.For(t, fmt.Sprintf("process group %d gone (no orphans)", pgid), func() ([]int, bool) {
		live := liveInGroup(t, pgid)
		return live, len(live) == 0
	})
}

func TestSuccessItemsAndEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := script(t, dir, "ok.sh", `
echo "pgid $$" > "$OUT/pgid.tmp"; echo >> "$OUT/pgid.tmp"; mv "$OUT/pgid.tmp" "$OUT/pgid"
printf '%s\n' "$CRAWLQ_RUN_ID" "$CRAWLQ_SPIDER" "$CRAWLQ_ARGS" "$CRAWLQ_SETTINGS" "$1" "${DATABASE_URL:-unset}" > "$OUT/env"
echo "hello from stdout"
echo "hello from stderr" >&2
printf '%s\n' '{"key":"a","url":"https://example.com/a","title":"A"}' >&3
printf '%s\n' '{"key":7,"title":"seven"}' >&3
printf '%s\n' '{"title":"no key"}' >&3
printf '%s\n' 'not json' '[1,2]' '' >&3
printf '%s\n' '{"key":"a","title":"A again"}' >> "$CRAWLQ_ITEMS_FILE"
exit 0
`)
	e := start(t, map[string]spider.CommandSpec{"okspider": {Command: []string{sh, "{spider}"}, Env: map[string]string{"OUT": dir}}},
		command.Config{}, items.Config{})
	// DATABASE_URL is set in this process (dbtest needs it) and must not leak into the command.
	id := e.schedule(t, "okspider", map[string]string{"q": "books"})
	r := e.wait(t, id)
	if r.State != "succeeded" {
		t.Fatalf("run state %q (error %q), want succeeded", r.State, r.Error)
	}
	got, err := items.ListItems(context.Background(), e.node.Queue.Pool(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, it := range got {
		keys[it.Key] = string(it.Data)
		if it.Spider != "okspider" {
			t.Errorf("item %q spider %q", it.Key, it.Spider)
		}
	}
	if len(got) != 3 || keys["a"] == "" || keys["7"] == "" {
		t.Fatalf("items %v, want keys a, 7 and one line: hash", keys)
	}
	if !strings.Contains(keys["a"], `"A"`) {
		t.Errorf("item a = %s, want the first one written", keys["a"])
	}
	for k := range keys {
		if k != "a" && k != "7" && !strings.HasPrefix(k, "line:") {
			t.Errorf("unexpected key %q", k)
		}
	}
	if r.Stats.Items < 3 {
		t.Errorf("run stats items %d, want at least 3", r.Stats.Items)
	}
	envLines := strings.Split(waitFile(t, filepath.Join(dir, "env")), "\n")
	want := []string{strconv.FormatInt(id, 10), "okspider", `{"q":"books"}`}
	for i, w := range want {
		if envLines[i] != w {
			t.Errorf("env line %d = %q, want %q", i, envLines[i], w)
		}
	}
	if !strings.Contains(envLines[3], `"obey_robots":true`) {
		t.Errorf("CRAWLQ_SETTINGS = %s", envLines[3])
	}
	if envLines[4] != "okspider" {
		t.Errorf("argv {spider} = %q", envLines[4])
	}
	if envLines[5] != "unset" {
		t.Errorf("DATABASE_URL leaked into the command: %q", envLines[5])
	}
	pg, _ := strconv.Atoi(strings.TrimPrefix(waitFile(t, filepath.Join(dir, "pgid")), "pgid "))
	assertGroupGone(t, pg)
}

// A command written for a pipe on stdout yields no items, its lines only logged: the run log
// says where items go instead of leaving a run of 0 items unexplained.
func TestItemsOnStdoutAreSaidToGoToFD3(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := script(t, dir, "stdout.sh", `
printf '%s\n' '{"key":"a","title":"A"}' '{"key":"b","title":"B"}'
exit 0
`)
	var logs runlog.Postgres
	e := startWith(t, map[string]spider.CommandSpec{"piped": {Command: []string{sh}}}, &command.Config{}, items.Config{},
		func(e *env, c *command.Config) {
			logs = runlog.Postgres{Pool: e.node.Crawler.Pool()}
			c.RunLog = logs
		})
	id := e.schedule(t, "piped", nil)
	if r := e.wait(t, id); r.State != "succeeded" || r.Stats.Items != 0 {
		t.Fatalf("run %s with %d items, want succeeded with none", r.State, r.Stats.Items)
	}
	const want = "the command wrote 2 lines to stdout and no items: a command spider's items go to file descriptor 3 (CRAWLQ_ITEMS_FD; as a path, CRAWLQ_ITEMS_FILE=/dev/fd/3)"
	// The run log is written before the run job ends (Runner.Run flushes it), so whole by now.
	lines, _, err := logs.Read(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if strings.Contains(l.Text, want) {
			return
		}
	}
	t.Errorf("the run log %+v does not say %q", lines, want)
}

func TestExitFailureFailsRunKeepsItems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := script(t, dir, "fail.sh", `
printf '%s\n' '{"key":"before-failure"}' >&3
echo "something broke" >&2
exit 1
`)
	e := start(t, map[string]spider.CommandSpec{"failspider": {Command: []string{sh}}}, command.Config{}, items.Config{})
	id := e.schedule(t, "failspider", nil)
	r := e.wait(t, id)
	if r.State != "failed" || !strings.Contains(r.Error, "exit status 1") {
		t.Fatalf("run state %q error %q, want failed with exit status 1", r.State, r.Error)
	}
	n, err := items.CountItems(context.Background(), e.node.Queue.Pool(), id)
	if err != nil || n != 1 {
		t.Fatalf("items %d (%v), want 1", n, err)
	}
	jobs, err := e.node.Queue.List(context.Background(), queue.ListParams{ParentID: id})
	if err != nil || len(jobs) != 1 || jobs[0].Attempt != 1 || jobs[0].State != queue.StateDead {
		t.Fatalf("run job %+v (%v): want dead after one attempt (exit 1 is not retried)", jobs, err)
	}
}

func TestTimeoutKillsWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Ignores SIGTERM and leaves a background child: SIGKILL to the group must take both.
	sh := script(t, dir, "hang.sh", `
trap '' TERM
sleep 300 &
echo "$$ $!" > "$OUT/pids.tmp"; mv "$OUT/pids.tmp" "$OUT/pids"
printf '%s\n' '{"key":"early"}' >&3
while :; do sleep 1; done
`)
	e := start(t, map[string]spider.CommandSpec{"hang": {Command: []string{sh}, Timeout: time.Second, Env: map[string]string{"OUT": dir}}},
		command.Config{KillGrace: 500 * time.Millisecond}, items.Config{})
	id := e.schedule(t, "hang", nil)
	r := e.wait(t, id)
	if r.State != "failed" || !strings.Contains(r.Error, "timed out") {
		t.Fatalf("run state %q error %q, want failed, timed out", r.State, r.Error)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pg, _ := strconv.Atoi(f[0])
	assertGroupGone(t, pg)
	if n, _ := items.CountItems(context.Background(), e.node.Queue.Pool(), id); n != 1 {
		t.Errorf("items %d, want the 1 written before the timeout", n)
	}
}

func TestCancelKillsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := script(t, dir, "long.sh", `
echo "$$" > "$OUT/pid.tmp"; mv "$OUT/pid.tmp" "$OUT/pid"
sleep 300
`)
	e := start(t, map[string]spider.CommandSpec{"long": {Command: []string{sh}, Env: map[string]string{"OUT": dir}}},
		command.Config{KillGrace: 500 * time.Millisecond}, items.Config{})
	id := e.schedule(t, "long", nil)
	pg, _ := strconv.Atoi(waitFile(t, filepath.Join(dir, "pid")))
	if err := e.node.Crawler.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	r := e.wait(t, id)
	if r.State != "cancelled" {
		t.Fatalf("run state %q error %q, want cancelled", r.State, r.Error)
	}
	assertGroupGone(t, pg)
}

func TestBackpressureBoundsBuffer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := script(t, dir, "many.sh", `
i=0
while [ $i -lt 3000 ]; do printf '{"key":"k%d","n":%d}\n' $i $i; i=$((i+1)); done >&3
`)
	e := start(t, map[string]spider.CommandSpec{"many": {Command: []string{sh}}},
		command.Config{BatchSize: 20}, items.Config{MaxItems: 50, BatchSize: 25})
	id := e.schedule(t, "many", nil)
	r := e.wait(t, id)
	if r.State != "succeeded" {
		t.Fatalf("run state %q error %q", r.State, r.Error)
	}
	n, err := items.CountItems(context.Background(), e.node.Queue.Pool(), id)
	if err != nil || n != 3000 {
		t.Fatalf("items %d (%v), want 3000", n, err)
	}
	if st := e.node.Pipeline.Stats(); st.MaxBufferedItems > 50 {
		t.Errorf("pipeline buffered %d items, above its bound 50", st.MaxBufferedItems)
	}
	if r.Stats.Items != 3000 {
		t.Errorf("run stats items %d, want 3000", r.Stats.Items)
	}
}

// TestExitStatusMapping calls Run directly: which endings are retried and which are not.
func TestExitStatusMapping(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	pl, err := items.New(items.NewPostgresSink(pool), items.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close(context.Background()) })
	r, err := command.New(command.Config{Pipeline: pl, Env: command.Inherited(os.LookupEnv, command.DefaultInheritEnv), KillGrace: 200 * time.Millisecond, MaxLogLine: 32})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := &crawl.Run{ID: 1, Spider: "x"}
	cases := []struct {
		body string
		is   error
		msg  string
	}{
		{"exit 0", nil, ""},
		{"exit 75", command.ErrExitStatus, "exit status 75 (temporary failure; retried)"},
		{"exit 3", command.ErrExitStatus, "exit status 3"},
		{"kill -9 $$", command.ErrExitStatus, "killed by signal killed"},
		{"head -c 100000 /dev/zero | tr '\\0' x; echo", nil, ""}, // one long log line, truncated
	}
	for i, c := range cases {
		sh := script(t, dir, fmt.Sprintf("c%d.sh", i), c.body+"\n")
		err := r.Run(context.Background(), run, spider.CommandSpec{Command: []string{sh}}, spider.Settings{})
		if c.is == nil {
			if err != nil {
				t.Errorf("%s: %v, want nil", c.body, err)
			}
			continue
		}
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v containing %q", c.body, err, c.is, c.msg)
		}
	}
	// A context that ends kills the command and says why.
	sh := script(t, dir, "sleep.sh", "sleep 300\n")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(queue.ErrWorkerStopping) })
	err = r.Run(ctx, run, spider.CommandSpec{Command: []string{sh}}, spider.Settings{})
	if !errors.Is(err, command.ErrStopped) || !errors.Is(err, queue.ErrWorkerStopping) {
		t.Errorf("stopped run: %v, want ErrStopped and ErrWorkerStopping", err)
	}
	// Nothing to run, or a missing program: clear errors, no panic.
	if err := r.Run(context.Background(), run, spider.CommandSpec{}, spider.Settings{}); !errors.Is(err, command.ErrInvalid) {
		t.Errorf("empty command: %v", err)
	}
	if err := r.Run(context.Background(), run, spider.CommandSpec{Command: []string{filepath.Join(dir, "missing")}}, spider.Settings{}); err == nil {
		t.Error("missing program: nil error")
	}
	if _, err := command.New(command.Config{}); err == nil || !strings.Contains(err.Error(), "Pipeline") {
		t.Errorf("config without pipeline: %v", err)
	}
}

// TestCancelSendsItsSignal: the signal a cancel asks for (cancel.json's signal=) is what the
// command gets, and a second cancel sends it again.
func TestCancelSendsItsSignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := script(t, dir, "traps.sh", `
trap 'echo USR1 >> "$OUT/got"' USR1
echo "$$" > "$OUT/pid.tmp"; mv "$OUT/pid.tmp" "$OUT/pid"
while [ "$(wc -l < "$OUT/got" 2>/dev/null || echo 0)" -lt 2 ]; do sleep 0.05; done
exit 0
`)
	cfg := command.Config{KillGrace: time.Minute, CancelPoll: 20 * time.Millisecond}
	e := startWith(t, map[string]spider.CommandSpec{"traps": {Command: []string{sh}, Env: map[string]string{"OUT": dir}}}, &cfg, items.Config{},
		func(e *env, c *command.Config) { c.Store = e.node.Store })
	id := e.schedule(t, "traps", nil)
	waitFile(t, filepath.Join(dir, "pid"))
	ctx := context.Background()
	cancel := func() {
		t.Helper()
		if _, err := e.node.Store.RequestCancel(ctx, id, "traps", "USR1"); err != nil { // first, as the api does
			t.Fatal(err)
		}
		if err := e.node.Crawler.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	waitFile(t, filepath.Join(dir, "got")) // the first USR1 arrived
	cancel()
	r := e.wait(t, id)
	if got := waitFile(t, filepath.Join(dir, "got")); r.State != "cancelled" || got != "USR1\nUSR1" {
		t.Fatalf("run %s (%s), signals %q: want cancelled after two USR1", r.State, r.Error, got)
	}
}

// TestTwoCancelsBeforeTheCommandLearns: two cancels recorded before the first reaches the
// command still make two signals, as under Scrapyd, where each cancel signals at once.
func TestTwoCancelsBeforeTheCommandLearns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := script(t, dir, "traps.sh", `
trap 'echo INT >> "$OUT/got"' INT
echo "$$" > "$OUT/pid.tmp"; mv "$OUT/pid.tmp" "$OUT/pid"
while [ "$(wc -l < "$OUT/got" 2>/dev/null || echo 0)" -lt 2 ]; do sleep 0.05; done
exit 0
`)
	cfg := command.Config{KillGrace: time.Minute, CancelPoll: 20 * time.Millisecond}
	e := startWith(t, map[string]spider.CommandSpec{"traps": {Command: []string{sh}, Env: map[string]string{"OUT": dir}}}, &cfg, items.Config{},
		func(e *env, c *command.Config) { c.Store = e.node.Store })
	id := e.schedule(t, "traps", nil)
	waitFile(t, filepath.Join(dir, "pid"))
	ctx := context.Background()
	for range 2 {
		if _, err := e.node.Store.RequestCancel(ctx, id, "traps", "INT"); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.node.Crawler.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	r := e.wait(t, id)
	if got := waitFile(t, filepath.Join(dir, "got")); r.State != "cancelled" || got != "INT\nINT" {
		t.Fatalf("run %s (%s), signals %q: want cancelled after two SIGINT", r.State, r.Error, got)
	}
}
