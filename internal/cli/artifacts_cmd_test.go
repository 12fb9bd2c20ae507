package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"crawlq/internal/artifact"
	"crawlq/internal/dbtest"
)

// crawlq artifacts RUN lists a run's failed rendered pages and --save writes their files.
func TestArtifactsCommand(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--arg", "base_url=http://127.0.0.1:9", "--delay", "1h")
	if code != 0 {
		t.Fatalf("schedule: %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	if code, out, errs = run(t, url, "artifacts", id); code != 0 || !strings.Contains(out, "kept no failed rendered page") {
		t.Fatalf("artifacts of a run without any: %d %q %q", code, out, errs)
	}
	p := dbtest.Open(t, url, 2)
	var runID int64
	if err := p.QueryRow(context.Background(), "select max(id) from crawlq_run").Scan(&runID); err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\nfake")
	if _, err := (artifact.Store{Pool: p}).Keep(context.Background(), artifact.Page{RunID: runID, JobID: 12, Attempt: 3, URL: "http://127.0.0.1:9/p/1",
		Err: `wait for "div.product": timeout`, At: time.Now(), Screenshot: png, HTML: []byte("<html>half drawn</html>")}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, out, errs = run(t, url, "artifacts", id, "--save", dir)
	if code != 0 || !strings.Contains(out, "page-12-1  ") || !strings.Contains(out, "attempt 3  http://127.0.0.1:9/p/1") ||
		!strings.Contains(out, "page-12-1.png (12 bytes), page-12-1.html (23 bytes)") || !strings.Contains(out, `failed: wait for "div.product": timeout`) {
		t.Fatalf("artifacts --save: %d %q %q", code, out, errs)
	}
	got, err := os.ReadFile(filepath.Join(dir, "page-12-1.png"))
	if err != nil || !bytes.Equal(got, png) {
		t.Fatalf("saved screenshot %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "page-12-1.html")); err != nil || string(got) != "<html>half drawn</html>" {
		t.Fatalf("saved HTML %q, %v", got, err)
	}
	if code, _, errs = run(t, url, "artifacts", "99999"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("artifacts of an unknown run: %d %q", code, errs)
	}
}
