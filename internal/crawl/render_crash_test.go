//go:build unix

package crawl_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"crawlq/internal/browser"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

// pidLog is a slog handler that keeps the pid of each browser the pool starts ("browser started"),
// so a test kills its own Chromium and none of the parallel tests'.
type pidLog struct {
	mu   sync.Mutex
	pids []int
}

func (h *pidLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *pidLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *pidLog) WithGroup(string) slog.Handler            { return h }
func (h *pidLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "browser started" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "pid" {
			h.mu.Lock()
			h.pids = append(h.pids, int(a.Value.Int64()))
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *pidLog) last() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pids) == 0 {
		return 0
	}
	return h.pids[len(h.pids)-1]
}

// A Chromium killed (SIGKILL) while it renders a page costs the page no attempt: the page is put
// back, rendered by the browser that replaces it, and its job completes at its first attempt;
// the run yields each item once.
func TestChromiumKilledMidPageCostsNoAttempt(t *testing.T) {
	t.Parallel()
	var gateOnce sync.Once
	arrived, release := make(chan struct{}), make(chan struct{})
	var apiHits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><a href="/p/1">1</a> <a href="/p/2">2</a></body></html>`)
	})
	mux.HandleFunc("/p/", func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/p/")
		fmt.Fprintf(w, `<html><body><div id="root"></div><script>
fetch("/api/%s").then(r => r.text()).then(sku => {
  document.getElementById("root").innerHTML = '<div class="product"><h1 class="title">Item ' + sku + '</h1><span class="sku">' + sku + '</span></div>';
});
</script></body></html>`, id)
	})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		apiHits.Add(1)
		first := false
		gateOnce.Do(func() { first = true })
		if first { // the first page's script waits here while its Chromium is killed
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "sku-"+strings.TrimPrefix(r.URL.Path, "/api/"))
	})
	base := serveHandler(t, mux)
	logs := &pidLog{}
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, renderSpec("follow: [{css: a, render: browser}]\nwait_for: div.product\n")), Queues: []string{"long"},
		Workers: 1, Worker: queue.WorkerConfig{Concurrency: 2}, Browser: &browser.Config{TabsPerBrowser: 2, Logger: slog.New(logs)}})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "js", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(2 * time.Minute):
		t.Fatal("no rendered page asked for its item")
	}
	pid := logs.last()
	if pid == 0 {
		t.Fatal("the pool logged no browser started")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	close(release)
	r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
	stored, err := items.CountItems(context.Background(), pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != crawl.StateSucceeded || stored != 2 {
		t.Fatalf("run %s with %d items (%v); want succeeded with 2", r.State, stored, r.Stats.ErrorsByKind)
	}
	if apiHits.Load() < 3 {
		t.Fatalf("%d item requests: the killed page was not rendered again", apiHits.Load())
	}
	if p := logs.last(); p == pid {
		t.Fatal("no browser replaced the killed one")
	}
	rows, err := pool.Query(context.Background(), `SELECT args->>'url', state, attempt FROM crawlq_job WHERE parent_id = $1 AND kind = 'page'`, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	pages := 0
	for rows.Next() {
		var url, state string
		var attempt int
		if err := rows.Scan(&url, &state, &attempt); err != nil {
			t.Fatal(err)
		}
		pages++
		if state != "succeeded" || attempt != 1 {
			t.Errorf("page %s: %s at attempt %d; want succeeded at its first", url, state, attempt)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if pages != 3 {
		t.Fatalf("%d page jobs, want 3", pages)
	}
}
