package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
)

// The meter finds the local server's processes and sees the CPU a query burns there, and
// this process's own CPU.
func TestCPUMeterSeesServerAndSelf(t *testing.T) {
	needProc(t)
	pool := dbtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := startCPU(ctx, pool)
	if m.pgErr != nil {
		t.Fatalf("the test server runs on this machine, but: %v", m.pgErr)
	}
	if _, err := pool.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	for x, i := 0, 0; i < 30_000_000; i++ {
		x += i * i
		_ = x
	}
	m.stop()
	if !m.PGKnown || m.PG <= 0 || m.Self <= 0 {
		t.Fatalf("meter: self %v, server %v (known %v)", m.Self, m.PG, m.PGKnown)
	}
	f := m.fields(1000)
	for _, k := range []string{"allocs_per_page=", "cpu_s=", "cpu_s_per_1k_pages=", "pg_cpu_s=", "pg_cpu_s_per_1k_pages=", "total_cpu_s_per_1k_pages="} {
		if !strings.Contains(f, k) || strings.Contains(f, "na") {
			t.Errorf("fields %q: want %s with a figure", f, k)
		}
	}
	// Unknown server CPU is reported as unknown, not as zero.
	m.PGKnown = false
	if f := m.fields(1000); !strings.Contains(f, "pg_cpu_s=na") {
		t.Errorf("fields without the server: %q", f)
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	needProc(t)
	st, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() || st.comm == "" {
		t.Fatalf("stat = %+v, want ppid %d", st, os.Getppid())
	}
}

// A small crawl of a site shaped like ../shared/bench/site prints the RESULT line with the
// CPU figures beside pages/s.
func TestCrawlReportsCPUPerPage(t *testing.T) {
	needProc(t)
	const items, per = 30, 7
	site := httptest.NewServer(catalogue(items, per))
	defer site.Close()
	url := dbtest.URL(t)
	t.Cleanup(func() {
		dbtest.Open(t, url, 1).Exec(context.Background(), "DROP SCHEMA IF EXISTS crawlq_bench_crawl_test CASCADE")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if _, err := Crawl(ctx, Config{URL: url, Schema: "crawlq_bench_crawl_test", Out: &out}, site.URL); err != nil {
		t.Fatal(err)
	}
	pages := 1 + (items+per-1)/per + items
	want := regexp.MustCompile(fmt.Sprintf(`^RESULT system=crawlq op=crawl pages=%d items=%d seconds=[0-9.]+ pages_per_s=[0-9]+ `+
		`allocs_per_page=[0-9]+ cpu_s=[0-9.]+ cpu_s_per_1k_pages=[0-9.]+ pg_cpu_s=[0-9.]+ pg_cpu_s_per_1k_pages=[0-9.]+ total_cpu_s_per_1k_pages=[0-9.]+ `+
		`pg_backends_cpu_s_per_1k_pages=[0-9.]+ own_total_cpu_s_per_1k_pages=[0-9.]+\n`+
		`RESULT system=crawlq op=crawl_dbcost pages=%d .* schema_rows_written_per=[0-9.]+\n$`, pages, items, pages))
	if !want.MatchString(out.String()) {
		t.Fatalf("output %q does not match %s", out.String(), want)
	}
}

// needProc skips a test that reads the CPU of processes from /proc, which only Linux has: off
// Linux (a developer's macOS) the meter reports the server's CPU as unknown instead.
func needProc(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc: Linux only")
	}
}

// The browser benchmark on a small demo site: the same pages fetched plainly (no items) and
// rendered (every item), each line with Chromium's CPU, then what a rendered page adds.
func TestCrawlBrowserReportsChromiumCPU(t *testing.T) {
	needProc(t)
	site := httptest.NewServer(demosite.New(demosite.Config{Items: 4, PerPage: 2}))
	defer site.Close()
	url := dbtest.URL(t)
	t.Cleanup(func() {
		dbtest.Open(t, url, 1).Exec(context.Background(), "DROP SCHEMA IF EXISTS crawlq_bench_browser_test CASCADE")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if _, err := CrawlBrowser(ctx, Config{URL: url, Schema: "crawlq_bench_browser_test", Out: &out}, site.URL); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^RESULT system=crawlq op=crawl_plain pages=6 items=0 .* chromium_cpu_s=0.00 all_cpu_s_per_1k_pages=[0-9.]+\n` +
		`RESULT system=crawlq op=crawl_plain_dbcost pages=6 .*\n` +
		`RESULT system=crawlq op=crawl_browser pages=6 items=4 .* chromium_cpu_s=[0-9.]*[1-9][0-9.]* all_cpu_s_per_1k_pages=[0-9.]+\n` +
		`RESULT system=crawlq op=crawl_browser_dbcost pages=6 .*\n` +
		`RESULT system=crawlq op=browser_vs_plain rendered=4 ms_cpu_per_rendered_page=[0-9.]+ ms_cpu_per_plain_page=[0-9.]+ ratio=[0-9.]+ pages_per_s_ratio=[0-9.]+\n$`)
	if !want.MatchString(out.String()) {
		t.Fatalf("output %q does not match %s", out.String(), want)
	}
}

// catalogue is a site shaped like ../shared/bench/site: a home page linking the first listing
// page, listing pages of per item links each chained by a next link, and an item page per item.
func catalogue(items, per int) http.Handler {
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, title, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><head><title>%s</title></head><body>%s</body></html>", title, body)
	}
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "User-agent: *\nAllow: /\n") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		page(w, "Catalogue", `<a class="next" href="/list/1">Browse</a>`)
	})
	mux.HandleFunc("/list/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/list/"))
		var b strings.Builder
		for i := (n-1)*per + 1; i <= n*per && i <= items; i++ {
			fmt.Fprintf(&b, `<li><a class="item" href="/item/%d">Item %d</a></li>`, i, i)
		}
		if n*per < items {
			fmt.Fprintf(&b, `<a class="next" href="/list/%d">Next</a>`, n+1)
		}
		page(w, "Listing", b.String())
	})
	mux.HandleFunc("/item/", func(w http.ResponseWriter, r *http.Request) {
		n := strings.TrimPrefix(r.URL.Path, "/item/")
		page(w, "Item "+n, `<div class="product"><h1 class="title">Item `+n+`</h1><p class="price">1.00</p></div>`)
	})
	return mux
}
