package crawl_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/proxy/proxytest"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
)

// syncBuffer is a process log a test reads while the node writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A spider's pages rotate through its proxies: one that refuses connections and one that starts
// banning (403 and a marker) are rested, their pages retried through the others without counting
// attempts, so every item arrives; the bans and proxy failures show in the run's stats and log,
// and no password appears in the process log or the run's log.
func TestProxiesRotateAndBannedPagesGoElsewhere(t *testing.T) {
	t.Parallel()
	const pages = 12
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A connection per request, so each goes through a tunnel of its own.
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/" {
			for i := 1; i <= pages; i++ {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a> `, i, i)
			}
			return
		}
		fmt.Fprintf(w, `<div class="product"><span class="sku">%s</span></div>`, strings.TrimPrefix(r.URL.Path, "/p/"))
	})
	base := serveHandler(t, mux)

	good := proxytest.NewHTTP(t, proxytest.HTTPOptions{User: "alice", Password: "pw-from-env-1"})
	socks := proxytest.NewSOCKS5(t, "bob", "pw-socks-2")
	banning := proxytest.NewHTTP(t, proxytest.HTTPOptions{User: "carol", Password: "pw-banning-3", BanAfter: 2, BanBody: "<h1>Access denied</h1>"})
	refusing := proxytest.Refusing(t, "dave", "pw-refusing-4")
	secrets := []string{"pw-from-env-1", "pw-socks-2", "pw-banning-3", "pw-refusing-4"}
	spec := fmt.Sprintf(`
name: px
start_urls: [http://127.0.0.1/]
obey_robots: false
concurrency: 4
proxies:
  - %s
  - %s
  - %s
  - %s
ban: {status: [403], body: Access denied}
follow:
  - css: a
items:
  - css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
`, strings.Replace(good.URL, "pw-from-env-1", "${CRAWLQ_PROXY_ALICE}", 1), socks.URL, banning.URL, refusing)

	var logBuf syncBuffer
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 4},
		Logger:   slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ProxyEnv: map[string]string{"CRAWLQ_PROXY_ALICE": "pw-from-env-1"}})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "px", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
	stored, err := items.CountItems(context.Background(), pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != crawl.StateSucceeded || stored != pages || r.Stats.Errors != 0 {
		t.Fatalf("run %s with %d items, %d errors (%v); want succeeded with %d items and none", r.State, stored, r.Stats.Errors, r.Stats.ErrorsByKind, pages)
	}
	if r.Stats.ErrorsByKind["banned"] < 1 || r.Stats.ErrorsByKind["proxy"] < 1 {
		t.Errorf("stats %v; want banned and proxy counted", r.Stats.ErrorsByKind)
	}
	// Each proxy's bans and failures are counted under its own kind, its password redacted.
	bannedKind := "proxy http://carol:xxxxx@" + strings.TrimPrefix(banning.URL, "http://carol:pw-banning-3@") + ": banned"
	failedKind := "proxy http://dave:xxxxx@" + strings.TrimPrefix(refusing, "http://dave:pw-refusing-4@") + ": failed"
	if r.Stats.ErrorsByKind[bannedKind] != r.Stats.ErrorsByKind["banned"] || r.Stats.ErrorsByKind[failedKind] < 1 {
		t.Errorf("stats %v; want %q (as many as banned) and %q", r.Stats.ErrorsByKind, bannedKind, failedKind)
	}
	for kind := range r.Stats.ErrorsByKind {
		for _, pw := range secrets {
			if strings.Contains(kind, pw) {
				t.Errorf("a password (%s) appears in the stats", pw)
			}
		}
	}
	if banning.Banned.Load() < 1 || good.Tunnels.Load() < 1 || socks.Tunnels.Load() < 1 || good.Refused.Load() != 0 {
		t.Errorf("proxies: banned %d, good tunnels %d (refused %d), socks tunnels %d; want each used and the ban met",
			banning.Banned.Load(), good.Tunnels.Load(), good.Refused.Load(), socks.Tunnels.Load())
	}
	lines, err := runlog.ReadAll(context.Background(), runlog.Postgres{Pool: pool}, s.RunID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var runLog strings.Builder
	for _, l := range lines {
		runLog.WriteString(l.Text + "\n")
	}
	for _, want := range []string{
		"proxy http://carol:xxxxx@" + strings.TrimPrefix(banning.URL, "http://carol:pw-banning-3@") + " rested for 10s: banned",
		"proxy http://dave:xxxxx@" + strings.TrimPrefix(refusing, "http://dave:pw-refusing-4@") + " rested for 10s",
	} {
		if !strings.Contains(runLog.String(), want) {
			t.Errorf("run log lacks %q:\n%s", want, runLog.String())
		}
	}
	procLog := logBuf.String()
	if !strings.Contains(procLog, "proxy rested") || !strings.Contains(procLog, `msg="page banned" run=`+fmt.Sprint(s.RunID)) {
		t.Errorf("process log lacks the rested proxies:\n%s", procLog)
	}
	for _, pw := range secrets {
		if strings.Contains(procLog, pw) || strings.Contains(runLog.String(), pw) {
			t.Errorf("a password (%s) appears in the logs", pw)
		}
	}
}

// A proxy benched by one worker process is benched for the others: node A meets a proxy that
// refuses its credentials and benches it (for a minute); node B, started after A stopped and
// which never saw it fail, crawls a second run without asking it once, and counts no proxy
// failure.
func TestProxyBenchSharedAcrossWorkers(t *testing.T) {
	t.Parallel()
	const pages = 6
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/" {
			for i := 1; i <= pages; i++ {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a> `, i, i)
			}
			return
		}
		fmt.Fprintf(w, `<div class="product"><span class="sku">%s</span></div>`, strings.TrimPrefix(r.URL.Path, "/p/"))
	})
	base := serveHandler(t, mux)
	bad := proxytest.NewHTTP(t, proxytest.HTTPOptions{User: "erin", Password: "the-right-one"})
	good := proxytest.NewHTTP(t, proxytest.HTTPOptions{})
	spec := fmt.Sprintf(`
name: bench
start_urls: [http://127.0.0.1/]
obey_robots: false
proxies: [%s, %s]
follow:
  - css: a
items:
  - css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
`, strings.Replace(bad.URL, "the-right-one", "a-wrong-one", 1), good.URL)

	pool := dbtest.Pool(t)
	crawlOn := func(name string) *crawl.Run {
		t.Helper()
		n, stop := startNode(t, pool, node.Config{Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 2},
			ProxyRest: time.Minute})
		defer stop()
		s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "bench", Args: map[string]string{"base_url": base}})
		if err != nil {
			t.Fatal(err)
		}
		r := waitRun(t, n.Crawler, s.RunID, time.Minute)
		if r.State != crawl.StateSucceeded || r.Stats.Items != pages {
			t.Fatalf("node %s: run %s with %d items (%v); want succeeded with %d", name, r.State, r.Stats.Items, r.Stats.ErrorsByKind, pages)
		}
		return r
	}
	r := crawlOn("A")
	refused := bad.Refused.Load()
	if refused < 1 || r.Stats.ErrorsByKind["proxy"] < 1 {
		t.Fatalf("node A: the bad proxy refused %d CONNECTs, stats %v; want it met and benched", refused, r.Stats.ErrorsByKind)
	}
	tunnels := good.Tunnels.Load()
	r = crawlOn("B")
	if n := bad.Refused.Load() - refused; n != 0 || r.Stats.ErrorsByKind["proxy"] != 0 {
		t.Errorf("node B asked the proxy node A benched %d times (stats %v); want never", n, r.Stats.ErrorsByKind)
	}
	if n := good.Tunnels.Load() - tunnels; n != pages+1 {
		t.Errorf("node B went through the good proxy %d times, want %d", n, pages+1)
	}
}
