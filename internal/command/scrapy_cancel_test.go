package command_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/api"
	"crawlq/internal/command"
	"crawlq/internal/crawl"
	"crawlq/internal/items"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

// heldSite is a catalogue of n item pages for testdata/scrapyproject's catalog spider whose
// last item page does not answer until release is called (or the test ends): a request Scrapy
// has in flight when it is cancelled, which its graceful shutdown waits for.
type heldSite struct {
	url      string
	held     chan struct{} // closed when the held page is first requested
	release  func()
	released chan struct{}
}

func serveHeldSite(t *testing.T, n int) *heldSite {
	t.Helper()
	s := &heldSite{held: make(chan struct{}), released: make(chan struct{})}
	var heldOnce, releaseOnce sync.Once
	s.release = func() { releaseOnce.Do(func() { close(s.released) }) }
	mux := http.NewServeMux()
	mux.HandleFunc("/catalogue/page-1.html", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		b.WriteString("<html><body>")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, `<article class="product_pod"><h3><a href="item-%d.html">Item %d</a></h3></article>`, i, i)
		}
		b.WriteString("</body></html>")
		w.Write([]byte(b.String()))
	})
	mux.HandleFunc("/catalogue/", func(w http.ResponseWriter, r *http.Request) {
		num, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/catalogue/item-"), ".html"))
		if err != nil || num < 1 || num > n {
			http.NotFound(w, r)
			return
		}
		if num == n {
			heldOnce.Do(func() { close(s.held) })
			select {
			case <-s.released:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, `<html><body><h1 class="title">Item %d</h1><span class="sku">SKU-%d</span><p class="price">%d.00</p>`+
			`<span class="category">test</span></body></html>`, num, num, num)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() {
		s.release()
		srv.Close()
	})
	s.url = "http://" + ln.Addr().String()
	return s
}

// scrapyEnv is a node running the catalog spider of testdata/scrapyproject (in the image) with
// real Scrapy, a run log, the spider store and the api that cancels its runs.
type scrapyEnv struct {
	*env
	logs runlog.Store
	api  *api.API
}

func startScrapy(t *testing.T, cfg command.Config, specEnv map[string]string) *scrapyEnv {
	t.Helper()
	if out, err := exec.Command("/usr/bin/python3", "-c", "import scrapy").CombinedOutput(); err != nil {
		t.Fatalf("Scrapy is missing (%v: %s): install Debian's python3-scrapy (scripts/deps.sh test)", err, out)
	}
	_, file, _, _ := runtime.Caller(0)
	project := filepath.Join(t.TempDir(), "project")
	if out, err := exec.Command("cp", "-r", filepath.Join(filepath.Dir(file), "..", "..", "testdata", "scrapyproject"), project).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	envVars := map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}
	for k, v := range specEnv {
		envVars[k] = v
	}
	spec := spider.CommandSpec{Command: []string{"/usr/bin/scrapy", "crawl", "{spider}"}, Dir: project, Env: envVars}
	se := &scrapyEnv{}
	se.env = startWith(t, map[string]spider.CommandSpec{"catalog": spec}, &cfg, items.Config{}, func(e *env, c *command.Config) {
		se.logs = runlog.Postgres{Pool: e.node.Crawler.Pool()}
		c.RunLog = se.logs
		c.RecordStats = e.node.Crawler.RecordCommandStats
		c.Store = e.node.Store
	})
	a, err := api.New(api.Config{Crawler: se.node.Crawler, Queue: se.node.Queue, Spiders: se.node.Spiders, Store: se.node.Store})
	if err != nil {
		t.Fatal(err)
	}
	se.api = a
	return se
}

func (se *scrapyEnv) scheduleCatalog(t *testing.T, base string) int64 {
	t.Helper()
	no := false
	s, err := se.node.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "catalog",
		Args: map[string]string{"base_url": base}, Settings: crawl.Overrides{ObeyRobots: &no}})
	if err != nil {
		t.Fatal(err)
	}
	return s.RunID
}

// cancel cancels run id through the api, as a Scrapyd client's cancel.json does.
func (se *scrapyEnv) cancel(t *testing.T, id int64) {
	t.Helper()
	out := string(se.api.HandleJSON(context.Background(), fmt.Appendf(nil, `{"action":"cancel","job":"%d"}`, id)))
	if !strings.Contains(out, `"status":"ok"`) {
		t.Fatalf("cancel: %s", out)
	}
}

// logText is the run's log so far.
func (se *scrapyEnv) logText(t *testing.T, id int64) string {
	t.Helper()
	lines, err := runlog.ReadAll(context.Background(), se.logs, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}

// waitLog waits for the run's log to hold want.
func (se *scrapyEnv) waitLog(t *testing.T, id int64, want string) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("run %d's log holds %q", id, want), func() (string, bool) {
		text := se.logText(t, id)
		return text, strings.Contains(text, want)
	})
}

var statsLine = regexp.MustCompile(`\[crawlq\] INFO: scrapy stats: item_scraped_count=(\d+) .* finish_reason=(\S+)`)

// TestScrapyCancelKeepsItems cancels a real Scrapy run while a request is in flight. Scrapy gets
// SIGINT and shuts down gracefully, which waits for that request; KillGrace is far shorter than
// the shutdown, and must not apply (a SIGKILL then lost every item not yet flushed and the final
// stats). Every item Scrapy scraped is stored and counted once.
func TestScrapyCancelKeepsItems(t *testing.T) {
	t.Parallel()
	site := serveHeldSite(t, 30)
	se := startScrapy(t, command.Config{KillGrace: 50 * time.Millisecond}, nil)
	id := se.scheduleCatalog(t, site.url)
	<-site.held
	se.cancel(t, id)
	se.waitLog(t, id, "shutting down gracefully")
	site.release()
	r := se.wait(t, id)
	text := se.logText(t, id)
	if r.State != "cancelled" || !strings.Contains(text, "Received SIGINT, shutting down gracefully") {
		t.Fatalf("run %s (%s), want cancelled with SIGINT, as Scrapyd cancels:\n%s", r.State, r.Error, text)
	}
	m := statsLine.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no final Scrapy stats in the run log:\n%s", text)
	}
	scraped, _ := strconv.ParseInt(m[1], 10, 64)
	stored, err := items.CountItems(context.Background(), se.node.Queue.Pool(), id)
	if err != nil {
		t.Fatal(err)
	}
	if scraped == 0 || stored != scraped || r.Stats.Items != scraped || m[2] != "shutdown" {
		t.Fatalf("item_scraped_count %d, finish_reason %s; stored %d, run stats %d: want every scraped item stored and counted once\n%s",
			scraped, m[2], stored, r.Stats.Items, text)
	}
	if strings.Contains(text, "SIGKILL to its process group") {
		t.Fatalf("a hard stop:\n%s", text)
	}
}

// TestScrapySecondCancelForces: a second cancel sends the signal again, as Scrapyd does, and
// Scrapy forces its shutdown instead of waiting for the request in flight, which never answers.
func TestScrapySecondCancelForces(t *testing.T) {
	t.Parallel()
	site := serveHeldSite(t, 30)
	se := startScrapy(t, command.Config{KillGrace: 50 * time.Millisecond, CancelPoll: 50 * time.Millisecond}, nil)
	id := se.scheduleCatalog(t, site.url)
	<-site.held
	se.cancel(t, id)
	se.waitLog(t, id, "Received SIGINT, shutting down gracefully")
	se.cancel(t, id)
	r := se.wait(t, id)
	text := se.logText(t, id)
	if r.State != "cancelled" || !strings.Contains(text, "Received SIGINT twice, forcing unclean shutdown") ||
		!strings.Contains(text, "[crawlq] WARNING: cancelled again (cancel 2): sent SIGINT") {
		t.Fatalf("run %s (%s), want cancelled by a forced shutdown:\n%s", r.State, r.Error, text)
	}
	if strings.Contains(text, "SIGKILL to its process group") {
		t.Fatalf("a hard stop:\n%s", text)
	}
}

// TestScrapyHardStopSaysSo: a Scrapy run that outlives ShutdownGrace is killed, and its log says so.
func TestScrapyHardStopSaysSo(t *testing.T) {
	t.Parallel()
	site := serveHeldSite(t, 30)
	se := startScrapy(t, command.Config{ShutdownGrace: 500 * time.Millisecond}, nil)
	id := se.scheduleCatalog(t, site.url)
	<-site.held
	se.cancel(t, id)
	r := se.wait(t, id)
	text := se.logText(t, id)
	if r.State != "cancelled" || !strings.Contains(text, "[crawlq] ERROR: the command was still running 500ms after SIGINT: sent SIGKILL") {
		t.Fatalf("run %s (%s), want cancelled by a hard stop that the log reports:\n%s", r.State, r.Error, text)
	}
}

// TestScrapyKeepsProjectStatsClass: a project's own STATS_CLASS runs, with crawlq's hook chained
// to it (crawlq used to replace it).
func TestScrapyKeepsProjectStatsClass(t *testing.T) {
	t.Parallel()
	site := serveHeldSite(t, 12)
	site.release()
	se := startScrapy(t, command.Config{}, map[string]string{"SCRAPY_PROJECT": "marking"})
	id := se.scheduleCatalog(t, site.url)
	r := se.wait(t, id)
	text := se.logText(t, id)
	if r.State != "succeeded" || r.Stats.Items != 12 || !strings.Contains(text, "MarkingStatsCollector closed the stats") ||
		!strings.Contains(text, "'catalog/stats_class': 'MarkingStatsCollector'") {
		t.Fatalf("run %s (%s), items %d: want succeeded with the project's stats collector:\n%s", r.State, r.Error, r.Stats.Items, text)
	}
}
