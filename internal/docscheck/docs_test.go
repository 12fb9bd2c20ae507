//go:build !windows

package docscheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/testwait"
)

const root = "../.."

// docFiles are the docs make docs-check reads: the README, the root documents and docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "RELIABILITY.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, _ := filepath.Rel(root, f)
		files = append(files, filepath.ToSlash(rel))
	}
	sort.Strings(files[3:])
	var out []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// Every relative link of the docs resolves: its file exists and its anchor is a heading there.
func TestDocLinksResolve(t *testing.T) {
	for _, f := range docFiles(t) {
		problems, err := CheckLinks(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(strings.TrimPrefix(p, root+"/"))
		}
	}
}

// Every command block of the docs runs: each file's blocks in order, in one bash with
// `set -euo pipefail`, in a directory that looks like the repository (its top-level entries
// linked, and bin/crawlq freshly built), against a fresh database schema. Background processes a
// doc starts (a worker, crawlq local) are stopped when its file ends.
func TestDocCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds crawlq and runs the docs' commands")
	}
	// The docs use crawlq's default addresses, as a reader would: another process on one of
	// them would fail a block with a less clear error.
	for _, addr := range []string{"127.0.0.1:8088", "127.0.0.1:6800", "127.0.0.1:3001"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is in use by another process, and the docs' commands serve on it (crawlq demo-site, crawlq local): stop it first: %v", addr, err)
		}
		l.Close()
	}
	bin := t.TempDir()
	// Built as the runner image's binary is (make image), like every crawlq binary the tests
	// build: they then share one set of compiled packages.
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bin, "crawlq"), "./cmd/crawlq")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Blocks(string(b))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		t.Run(f, func(t *testing.T) { runDoc(t, f, blocks, filepath.Join(bin, "crawlq")) })
	}
}

func runDoc(t *testing.T, file string, blocks []Block, crawlq string) {
	_, dbURL := dbtest.EmptySchema(t)
	dir := repoFarm(t, crawlq)
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	// Should this test process be killed (a go test timeout, ^C) before it stops the group, the
	// group stops itself: what a doc left running would otherwise hold its ports for the next run.
	script.WriteString("( while kill -0 $PPID 2>/dev/null; do sleep 1; done; kill -TERM -- -$$ ) >/dev/null 2>&1 &\n")
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", file, b.Line)
		switch b.Mode {
		case Skip:
			t.Logf("%s: not run: %s", where, b.Reason)
			continue
		case Flags:
			fmt.Fprintf(&script, "echo '::docs-check %s (flags)' >&2\n", where)
			for _, c := range FlagChecks(b.Text) {
				script.WriteString(c + "\n")
			}
			continue
		}
		fmt.Fprintf(&script, "echo '::docs-check %s' >&2\n", where)
		script.WriteString(Strict(b.Text))
	}
	script.WriteString("echo '::docs-check done' >&2\n")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "out.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	// A file, not a pipe, takes the output: background processes keep their copy open.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"),
		// bin/crawlq rebuilt by `make` here reuses the packages compiled for the build above.
		"GOFLAGS=-trimpath", "CGO_ENABLED=0",
	)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	runErr := cmd.Wait()
	stopGroup(t, cmd.Process.Pid)
	out, _ := os.ReadFile(logPath)
	if testing.Verbose() {
		t.Logf("output:\n%s", tail(string(out), 6000))
	}
	if runErr != nil {
		last := "the start"
		for _, m := range regexp.MustCompile(`::docs-check (\S+)`).FindAllStringSubmatch(string(out), -1) {
			last = m[1]
		}
		t.Errorf("%s: the block at %s failed (%v); to leave a command unrun, put <!-- docs-check: skip REASON --> before its block (see internal/docscheck). Output:\n%s",
			file, last, runErr, tail(string(out), 6000))
	}
	if left := cleanLeaves(t, dir); len(left) > 0 {
		t.Errorf("%s: `make clean` left what the doc's commands wrote: %s (add them to the Makefile's clean target)", file, strings.Join(left, ", "))
	}
}

// cleanLeaves runs `make clean` where a doc's commands ran and returns what is left there that
// the repository does not hold: a reader who follows the doc and then cleans up should find the
// checkout as it was.
func cleanLeaves(t *testing.T, dir string) []string {
	t.Helper()
	clean := exec.Command("make", "-s", "clean")
	clean.Dir = dir
	if out, err := clean.CombinedOutput(); err != nil {
		t.Fatalf("make clean: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 {
			left = append(left, e.Name())
		}
	}
	return left
}

// repoFarm makes a directory whose top-level entries link to the repository's, with bin/crawlq a
// copy of the fresh build: commands run as in the repository, and files they write stay here.
func repoFarm(t *testing.T, crawlq string) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "bin", "build", ".local", ".git":
			continue
		}
		if err := os.Symlink(filepath.Join(abs, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(crawlq)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "crawlq"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// stopGroup ends what a doc left running (its process group) with SIGTERM, as a reader's Ctrl-C
// would, and waits until it is gone: a process that ignores SIGTERM fails the test (and is then
// killed).
func stopGroup(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return
	}
	defer syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck // gone already, or stopped here whatever the wait said
	testwait.Until(t, fmt.Sprintf("the processes a doc started (group %d) to stop on SIGTERM", pgid), func() bool {
		return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
