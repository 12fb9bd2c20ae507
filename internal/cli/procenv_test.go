package cli_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/cli"
	"crawlq/internal/dbtest"
)

// TestServiceCommandsCheckTheirEnvironmentFirst: crawlq worker, runner and local read and check
// their environment before they connect to anything, so a bad value stops them at once with its
// name, not after the database (which they wait minutes for) answers. The database here never
// answers; ctx bounds the old behaviour, which waited for it.
func TestServiceCommandsCheckTheirEnvironmentFirst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"worker"}, map[string]string{"CRAWLQ_METRICS_PER_SPIDER": "maybe"}, "CRAWLQ_METRICS_PER_SPIDER"},
		{[]string{"runner"}, map[string]string{"CRAWLQ_METRICS_PER_SPIDER": "maybe"}, "CRAWLQ_METRICS_PER_SPIDER"},
		{[]string{"worker"}, map[string]string{"CRAWLQ_RETAIN_DEAD": "forever"}, "CRAWLQ_RETAIN_DEAD"},
		{[]string{"local"}, map[string]string{"CRAWLQ_METRICS_PER_SPIDER": "maybe"}, "CRAWLQ_METRICS_PER_SPIDER"},
		{[]string{"local"}, map[string]string{"CRAWLQ_LOG_LEVEL": "loud"}, "CRAWLQ_LOG_LEVEL"},
	} {
		refusedFirst(t, map[string]string{"DATABASE_URL": noDatabase}, c.env, c.args, c.want)
	}
}

// noDatabase is a database URL that never answers.
const noDatabase = "postgres://crawlq@127.0.0.1:1/none?connect_timeout=1"

// refusedFirst runs crawlq args with the variables of base and env (env's win) and wants it
// refused as a usage error (exit 2) naming want; ctx bounds a command that went on to connect,
// which here never answers.
func refusedFirst(t *testing.T, base, env map[string]string, args []string, want string) {
	t.Helper()
	vars := maps.Clone(base)
	maps.Copy(vars, env)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := cli.Main(ctx, args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }})
	if code != 2 || !strings.Contains(errb.String(), want) {
		t.Errorf("%v with %v: exit %d, stderr %q; want 2 naming %s before connecting", args, env, code, errb.String(), want)
	}
}

// TestServiceCommandsReadOnlyWhatTheyUse: with maintenance off, a worker's or runner's event and
// retention settings are not read, so a bad one does not stop it.
func TestServiceCommandsReadOnlyWhatTheyUse(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := runWithEnv(t, map[string]string{"DATABASE_URL": url, "CRAWLQ_MAX_MEMORY_MIB": "1",
		"CRAWLQ_METRICS_PER_SPIDER": "maybe", "CRAWLQ_RETAIN_DEAD": "forever"}, "runner", "--maintain-every", "0")
	if code != 0 || !strings.Contains(out, "runner stopped: memory") {
		t.Fatalf("runner without maintenance: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestCommandsCheckTheirEnvironmentFirst: crawlq schedules, crawlq logs, the commands that wake
// the dispatcher (CRAWLQ_DISPATCH_FUNCTION) and the commands going through the api function
// (CRAWLQ_API) read and check their variables at their start, so a bad
// one is refused with its name (a usage error, exit 2) before the database or the endpoint, which
// here never answer, is tried.
func TestCommandsCheckTheirEnvironmentFirst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"schedules", "list"}, map[string]string{"CRAWLQ_SCHEDULE_GROUP": "my group"}, "CRAWLQ_SCHEDULE_GROUP"},
		{[]string{"schedules", "add", "--spider", "demo", "--cron", "@daily"}, map[string]string{"CRAWLQ_SCHEDULE_GROUP": "g/1"}, "CRAWLQ_SCHEDULE_GROUP"},
		{[]string{"schedules", "del", "x"}, map[string]string{"CRAWLQ_SCHEDULE_GROUP": strings.Repeat("g", 65)}, "CRAWLQ_SCHEDULE_GROUP"},
		{[]string{"logs", "1"}, map[string]string{"CRAWLQ_RUN_LOG_GROUP": "runs?"}, "CRAWLQ_RUN_LOG_GROUP"},
		{[]string{"schedule", "--spider", "demo"}, map[string]string{"CRAWLQ_DISPATCH_FUNCTION": "crawlq dispatch"}, "CRAWLQ_DISPATCH_FUNCTION"},
		{[]string{"cancel-run", "1"}, map[string]string{"CRAWLQ_DISPATCH_FUNCTION": "crawlq dispatch"}, "CRAWLQ_DISPATCH_FUNCTION"},
		{[]string{"redrive"}, map[string]string{"CRAWLQ_DISPATCH_FUNCTION": "crawlq dispatch"}, "CRAWLQ_DISPATCH_FUNCTION"},
		{[]string{"spider", "delete", "demo"}, map[string]string{"CRAWLQ_DISPATCH_FUNCTION": "crawlq dispatch"}, "CRAWLQ_DISPATCH_FUNCTION"},
		{[]string{"runs"}, map[string]string{"CRAWLQ_API": "crawlq api", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, "CRAWLQ_API"},
		{[]string{"--api", "crawlq/api", "runs"}, map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, "--api"},
		{[]string{"runs"}, map[string]string{"CRAWLQ_API": "crawlq-api", "AWS_ENDPOINT_URL": "127.0.0.1:1"}, "AWS_ENDPOINT_URL"},
		{[]string{"runs"}, map[string]string{"CRAWLQ_API": "crawlq-api", "AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_REGION": "US East"}, "AWS_REGION"},
		// The dispatch function's poke is sent with the AWS variables the command read at its start.
		{[]string{"schedule", "--spider", "demo"}, map[string]string{"CRAWLQ_DISPATCH_FUNCTION": "crawlq-dispatch", "AWS_REGION": "US East"}, "AWS_REGION"},
		{[]string{"cancel-run", "1"}, map[string]string{"CRAWLQ_DISPATCH_FUNCTION": "crawlq-dispatch", "AWS_ENDPOINT_URL": "127.0.0.1:1"}, "AWS_ENDPOINT_URL"},
	} {
		// Static credentials: were a remote command to get as far as the SDK's chain, it would not
		// look for an instance role off this host.
		refusedFirst(t, map[string]string{"DATABASE_URL": noDatabase, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"},
			c.env, c.args, c.want)
	}
}

// TestBenchChecksItsEnvironmentFirst: crawlq bench refuses a bad CRAWLQ_DB_EXEC_MODE, naming it,
// before it starts anything (here: the CPU profile it was asked for is not begun), and runs with
// every good one, simple too (pgx names it simple_protocol in the URL the bench opens).
func TestBenchChecksItsEnvironmentFirst(t *testing.T) {
	t.Parallel()
	prof := filepath.Join(t.TempDir(), "cpu.out")
	code, _, errs := runWithEnv(t, map[string]string{"DATABASE_URL": noDatabase, "CRAWLQ_DB_EXEC_MODE": "bogus"},
		"bench", "--op", "insert", "--jobs", "10", "--cpuprofile", prof)
	if code != 1 || !strings.Contains(errs, `CRAWLQ_DB_EXEC_MODE: `) {
		t.Fatalf("bench with CRAWLQ_DB_EXEC_MODE=bogus: exit %d, stderr %q; want 1 naming the variable", code, errs)
	}
	if _, err := os.Stat(prof); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the CPU profile was begun before the environment was checked: %v", err)
	}
	url := dbtest.URL(t)
	t.Cleanup(func() {
		dbtest.Open(t, url, 1).Exec(context.Background(), "DROP SCHEMA IF EXISTS crawlq_bench_cli_env CASCADE")
	})
	for _, mode := range []string{"exec", "simple", "cache_describe", "cache_statement"} {
		code, out, errs := runWithEnv(t, map[string]string{"DATABASE_URL": url, "CRAWLQ_DB_EXEC_MODE": mode},
			"bench", "--op", "insert", "--jobs", "10", "--schema", "crawlq_bench_cli_env", "--quiet")
		if code != 0 || !strings.Contains(out, "insert") {
			t.Errorf("bench with CRAWLQ_DB_EXEC_MODE=%s: exit %d, stdout %q, stderr %q", mode, code, out, errs)
		}
	}
}

// TestDeployChecksItsEnvironmentFirst: crawlq deploy and plan refuse an AWS_ENDPOINT_URL that is
// not a URL, naming it, before they create their work directory or run terraform.
func TestDeployChecksItsEnvironmentFirst(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"deploy", "--allow-no-alarm-email", "--push-image", "false"}, {"plan"}} {
		cmd := args[0]
		work := filepath.Join(t.TempDir(), "work")
		code, _, errs := runWithEnv(t, map[string]string{"AWS_ENDPOINT_URL": "127.0.0.1:4566"}, append(args, "--dir", "../../terraform",
			"--work-dir", work, "--terraform", filepath.Join(t.TempDir(), "no-terraform"), "--build-dir", t.TempDir())...)
		if code != 2 || !strings.Contains(errs, "AWS_ENDPOINT_URL") {
			t.Errorf("%s with AWS_ENDPOINT_URL=127.0.0.1:4566: exit %d, stderr %q; want 2 naming the variable", cmd, code, errs)
		}
		if _, err := os.Stat(work); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s made its work directory before checking its environment: %v", cmd, err)
		}
	}
}

// TestCommandsReadEachVariableOnce: a command reads each variable once, at its start, into its
// struct; what follows reads the struct (a second read could see another value than the one
// checked). The api function and the database here never answer.
func TestCommandsReadEachVariableOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"runs"}, map[string]string{"CRAWLQ_API": "crawlq-api", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}},
		{[]string{"--api", "crawlq-api", "runs"}, map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}},
		{[]string{"stats"}, map[string]string{"DATABASE_URL": noDatabase}},
		{[]string{"schedule", "--spider", "demo"}, map[string]string{"DATABASE_URL": noDatabase, "CRAWLQ_DISPATCH_FUNCTION": "crawlq-dispatch"}},
	} {
		vars := map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
		maps.Copy(vars, c.env)
		var mu sync.Mutex
		reads := map[string]int{}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errb bytes.Buffer
		cli.Main(ctx, c.args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
			mu.Lock()
			defer mu.Unlock()
			reads[k]++
			return vars[k]
		}})
		cancel()
		for k, n := range reads {
			if n > 1 {
				t.Errorf("%v read %s %d times; want once", c.args, k, n)
			}
		}
	}
}

// TestDeployTakesTerraformVariablesFromItsEnvironment: crawlq deploy's alarm_email check reads
// TF_VAR_alarm_email from the environment the command was given (Env.Environ), the one terraform
// starts from, not from the process's.
func TestDeployTakesTerraformVariablesFromItsEnvironment(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), []string{"deploy", "--push-image", "false", "--dir", "../../terraform",
		"--work-dir", filepath.Join(t.TempDir(), "work"), "--terraform", filepath.Join(t.TempDir(), "no-terraform"), "--build-dir", t.TempDir()},
		cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
			Environ: func() []string { return []string{"TF_VAR_alarm_email=ops@example.com"} }})
	if code == 0 || strings.Contains(errb.String(), "alarm_email is empty") {
		t.Fatalf("deploy with TF_VAR_alarm_email in its environment: exit %d, stderr %q; want it past the alarm_email check (and failing at the missing terraform)", code, errb.String())
	}
}
