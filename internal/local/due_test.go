package local_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
)

// A page put back for its host's pause comes due after the poke and workers that started its run
// have gone (the workers leave once idle, as Lambda workers do): crawlq local wakes dispatch when
// the soonest delayed job is due, so the host is probed on time, not at the next dispatch tick
// (an hour here), and a run against a dead site ends within its start down limit and a probe or
// two. Real time is the point: the pauses pass.
func TestPausedHostIsProbedOnTimeNotAtTheTick(t *testing.T) {
	_, url := dbtest.Schema(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now

	spec, err := os.ReadFile("../../spiders/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(spec), "name: demo", "name: deadstart", 1)
	s = s[:strings.Index(s, "monitors:")] + "retry:\n  host_pause: 3s\n  max_host_pause: 6s\n  start_down_limit: 10s\n"
	specPath := filepath.Join(t.TempDir(), "deadstart.yaml")
	if err := os.WriteFile(specPath, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	crawlqCLI(t, url, "spider", "push", specPath)
	c := serveLocal(t, url, time.Hour)

	t0 := time.Now()
	id, err := strconv.ParseInt(crawlqCLI(t, url, "schedule", "--spider", "deadstart", "--arg", "base_url="+dead), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// Probes at about 3, 9 and 15 s (pauses of 3 s, 6 s, 6 s); the one past 10 s kills the page.
	r := waitRun(t, c, id, "finished", (*crawl.Run).Finished)
	t.Logf("a run against a dead site: %s after %s (%v)", r.State, time.Since(t0).Round(time.Millisecond), r.Stats.ErrorsByKind)
	if r.State != crawl.StateFailed || r.DeadPages != 1 {
		t.Errorf("run %s with %d dead pages; want failed with its start page dead", r.State, r.DeadPages)
	}
}
