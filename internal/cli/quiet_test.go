package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"crawlq/internal/dbtest"
)

// A one-shot command's output is its own message: crawlq cancel-run printed the crawl's Info log
// line ("INFO run finished run=22 state=cancelled") on standard error beside it. Run as a real
// process, since that line went to the process's standard error, not the command's Env.
func TestCommandPrintsItsMessageNotTheCrawlsLog(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--delay", "1h")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("schedule: %d %q", code, errs)
	}
	bin := filepath.Join(t.TempDir(), "crawlq")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "crawlq/cmd/crawlq")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the other tests build it: one set of compiled packages
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "cancel-run", id)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "run "+id) || stderr.Len() != 0 {
		t.Errorf("crawlq cancel-run %s: %v, stdout %q, stderr %q; want its message alone", id, err, stdout.String(), stderr.String())
	}
}
