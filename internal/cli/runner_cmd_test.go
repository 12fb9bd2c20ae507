package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"crawlq/internal/cli"
	"crawlq/internal/dbtest"
)

func runWithEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

func TestRunnerCommand(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	// A 1 MiB memory limit (from the environment, as RunTask overrides set it) is passed at the
	// first check: the runner recycles itself at once, cleanly.
	code, out, errs := runWithEnv(t, map[string]string{"DATABASE_URL": url, "CRAWLQ_MAX_MEMORY_MIB": "1", "CRAWLQ_QUEUE": "long2"},
		"runner", "--upkeep", "0")
	if code != 0 || !strings.Contains(out, "runner stopped: memory") || !strings.Contains(errs, `"queue":"long2"`) {
		t.Fatalf("runner with a 1 MiB limit: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// A flag beats the environment; bad values are usage errors naming what is wrong.
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"CRAWLQ_CONCURRENCY": "many"}, nil, "CRAWLQ_CONCURRENCY"},
		{nil, []string{"--grace", "115s"}, "stopTimeout"},
		{nil, []string{"--queue", "Bad Queue"}, "Queue"},
		{nil, []string{"extra"}, "unexpected arguments"},
	} {
		env := map[string]string{"DATABASE_URL": url}
		for k, v := range c.env {
			env[k] = v
		}
		code, _, errs := runWithEnv(t, env, append([]string{"runner"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("runner %v with %v: exit %d, stderr %q; want 2 naming %s", c.args, c.env, code, errs, c.want)
		}
	}
}
