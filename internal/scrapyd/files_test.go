package scrapyd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/api"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/runlog"
	"crawlq/internal/scrapyd"
	"crawlq/internal/spiderstore"
)

// fixture is the Scrapyd API on a fresh schema, with runs of the built-in demo spider (project
// "default") put in the states a test needs.
type fixture struct {
	base  string
	pool  *pgxpool.Pool
	store *spiderstore.Store
	log   runlog.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f, _ := newFixtureWith(t, nil)
	return f
}

// newFixtureWith is newFixture with its server's config adjusted by adjust (when not nil); it
// returns the server too.
func newFixtureWith(t *testing.T, adjust func(*scrapyd.Config)) (*fixture, *scrapyd.Server) {
	t.Helper()
	pool := dbtest.Pool(t)
	// Eggs' spiders are read from their sources (no Python): these tests are about the HTTP.
	st, err := spiderstore.New(spiderstore.Config{Pool: pool, Lister: spiderstore.StaticLister{}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{Pool: pool, MaintainEvery: -1, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Pipeline.Close(context.Background()) })
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pool: pool, store: n.Store, log: runlog.Postgres{Pool: pool}}
	cfg := scrapyd.Config{API: a, Store: n.Store, Pool: pool, RunLog: f.log}
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := scrapyd.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	f.base = ts.URL
	return f, srv
}

// schedule schedules the demo spider under jobid and returns its run id.
func (f *fixture) schedule(t *testing.T, jobid string) int64 {
	t.Helper()
	var out map[string]any
	f.post(t, "/schedule.json", url.Values{"project": {"default"}, "spider": {"demo"}, "jobid": {jobid}, "base_url": {"http://127.0.0.1:9"}}, &out)
	if out["status"] != "ok" {
		t.Fatalf("schedule %s: %v", jobid, out)
	}
	id, err := f.store.JobIDTaken(context.Background(), jobid)
	if err != nil || id == 0 {
		t.Fatalf("job %s: run %d, %v", jobid, id, err)
	}
	return id
}

// setRun puts a run in a state with times and figures, as the crawl would have left it.
func (f *fixture) setRun(t *testing.T, id int64, state string, started, finished *time.Time, pages, nitems int64) {
	t.Helper()
	_, err := f.pool.Exec(context.Background(), `UPDATE crawlq_run SET state = $2, started_at = $3, finished_at = $4, pages = $5, items = $6 WHERE id = $1`,
		id, state, started, finished, pages, nitems)
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) post(t *testing.T, path string, form url.Values, out any) {
	t.Helper()
	resp, err := http.PostForm(f.base+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
}

func (f *fixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(f.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// LogParser's DATETIME_PATTERN at the start of a line marks a log entry (logparser/common.py).
var logEntryRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} `)

// The log is the command's output byte for byte, crawlq's own lines in Scrapy's format, and
// only at the job's own project and spider.
func TestLogIsScrapysLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.schedule(t, "log-1")
	now := time.Now()
	f.setRun(t, id, "running", &now, nil, 0, 0)
	stored := []string{
		"2026-11-24 16:19:36 [scrapy.utils.log] INFO: Scrapy 2.11.2 started (bot: catalog)",
		"crawlq: started [\"scrapy\" \"crawl\" \"catalog\"] (pid 42, timeout 1h0m0s)",
		"2026-11-24 16:19:37 [scrapy.core.scraper] ERROR: Spider error processing <GET http://x/1> (referer: None)",
		"Traceback (most recent call last):",
		"  ValueError: cannot parse \t tabs and ünïcode kept",
		"",
		"2026-11-24 16:19:38 [scrapy.core.engine] INFO: Spider closed (finished)",
	}
	if err := f.log.Append(context.Background(), id, stored); err != nil {
		t.Fatal(err)
	}
	code, body := f.get(t, "/logs/default/demo/log-1.log")
	if code != 200 {
		t.Fatalf("log: %d %s", code, body)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) != len(stored) {
		t.Fatalf("log has %d lines, want %d:\n%s", len(lines), len(stored), body)
	}
	for i, l := range lines {
		if i == 1 {
			continue
		}
		if l != stored[i] {
			t.Fatalf("line %d = %q, want the stored line byte for byte %q", i, l, stored[i])
		}
	}
	crawlqLine := regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \[crawlq\] INFO: started \["scrapy" "crawl" "catalog"\] \(pid 42, timeout 1h0m0s\)$`)
	if !crawlqLine.MatchString(lines[1]) || !logEntryRE.MatchString(lines[1]) {
		t.Fatalf("crawlq's line = %q, want Scrapy's format", lines[1])
	}
	// crawlq's run events in the log read as Scrapy's lines too.
	at := time.Date(2026, 11, 24, 16, 19, 40, 0, time.Local)
	if err := (runlog.EventLog{Store: f.log}).RunEvent(context.Background(), id, at, "state succeeded"); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, "/logs/default/demo/log-1.log")
	if want := "2026-11-24 16:19:40 [crawlq] INFO: state succeeded\n"; !strings.HasSuffix(body, want) {
		t.Fatalf("log ends %q, want the event as %q", body[max(0, len(body)-200):], want)
	}
	// A log longer than one read of the store (1000 lines) comes whole and in order.
	more := make([]string, 2500)
	for i := range more {
		more[i] = fmt.Sprintf("2026-11-24 16:20:00 [scrapy.core.engine] DEBUG: Crawled (200) <GET http://127.0.0.1/%d>", i)
	}
	if err := f.log.Append(context.Background(), id, more); err != nil {
		t.Fatal(err)
	}
	_, long := f.get(t, "/logs/default/demo/log-1.log")
	if want := body + strings.Join(more, "\n") + "\n"; long != want {
		t.Fatalf("long log: %d bytes, want %d", len(long), len(want))
	}
	body = long
	// The run id serves the same log; a wrong project or spider, or an unknown job, is a 404.
	if code, b2 := f.get(t, fmt.Sprintf("/logs/default/demo/%d.log", id)); code != 200 || b2 != body {
		t.Fatalf("log by run id: %d", code)
	}
	for _, p := range []string{"/logs/WRONG/demo/log-1.log", "/logs/default/other/log-1.log", "/logs/default/demo/nosuch.log",
		"/items/WRONG/demo/log-1.jl", "/logs/WRONG/demo/log-1.json"} {
		if code, b := f.get(t, p); code != 404 {
			t.Fatalf("GET %s: %d %q, want 404", p, code, b)
		}
	}
}

// ScrapydWeb's JOB_PATTERN and HREF_PATTERN (scrapydweb/views/dashboard/jobs.py and
// utils/poll.py, ScrapydWeb 1.6), with the verbose pattern's layout whitespace removed. ScrapydWeb
// first deletes the <thead> (re.S), then takes every match of JOB_PATTERN as a job.
var (
	swJobRE = regexp.MustCompile(`<tr>\s*` +
		`<td>(?P<Project>.*?)</td>\s*` +
		`<td>(?P<Spider>.*?)</td>\s*` +
		`<td>(?P<Job>.*?)</td>\s*` +
		`(?:<td>(?P<PID>.*?)</td>\s*)?` +
		`(?:<td>(?P<Start>.*?)</td>\s*)?` +
		`(?:<td>(?P<Runtime>.*?)</td>\s*)?` +
		`(?:<td>(?P<Finish>.*?)</td>\s*)?` +
		`(?:<td>(?P<Log>.*?)</td>\s*)?` +
		`(?:<td>(?P<Items>.*?)</td>\s*)?` +
		`[\w\W]*?` +
		`</tr>`)
	swTheadRE = regexp.MustCompile(`(?s)<thead>.*?</thead>`)
	swHrefRE  = regexp.MustCompile(`href=['"](.+?)['"]`)
)

type swJob struct{ project, spider, job, pid, start, runtime, finish, log, items string }

// parseJobsPage reads a jobs page as ScrapydWeb does.
func parseJobsPage(t *testing.T, page string) []swJob {
	t.Helper()
	if !strings.Contains(page, "<h1>Jobs</h1>") {
		t.Fatalf("no <h1>Jobs</h1>: ScrapydWeb takes the page for a failure:\n%s", page)
	}
	page = swTheadRE.ReplaceAllString(page, "")
	var jobs []swJob
	for _, m := range swJobRE.FindAllStringSubmatch(page, -1) {
		j := swJob{m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9]}
		for _, v := range []string{j.start, j.finish} {
			if v == "" {
				continue
			}
			if _, err := time.ParseInLocation("2006-01-02 15:04:05", v, time.Local); err != nil {
				t.Fatalf("time %q: ScrapydWeb's strptime('%%Y-%%m-%%d %%H:%%M:%%S') fails: %v", v, err)
			}
		}
		for _, v := range []*string{&j.log, &j.items} {
			if m := swHrefRE.FindStringSubmatch(*v); m != nil {
				*v = m[1]
			}
		}
		jobs = append(jobs, j)
	}
	return jobs
}

func TestJobsPageAsScrapydWebReadsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.schedule(t, "pending-1")
	running := f.schedule(t, "running-1")
	done := f.schedule(t, "finished-1")
	cancelled := f.schedule(t, "cancelled-early")
	started := time.Now().Add(-90 * time.Minute)
	ended := started.Add(61*time.Minute + 5*time.Second)
	f.setRun(t, running, "running", &started, nil, 0, 0)
	f.setRun(t, done, "succeeded", &started, &ended, 12, 34)
	f.setRun(t, cancelled, "cancelled", nil, &ended, 0, 0)

	code, page := f.get(t, "/jobs")
	if code != 200 {
		t.Fatalf("/jobs: %d %s", code, page)
	}
	jobs := parseJobsPage(t, page)
	if len(jobs) != 3 {
		t.Fatalf("ScrapydWeb reads %d jobs, want 3 (pending, running, finished; a job cancelled before it started is not listed): %+v\n%s", len(jobs), jobs, page)
	}
	byID := map[string]swJob{}
	for _, j := range jobs {
		byID[j.job] = j
		if j.project != "default" || j.spider != "demo" {
			t.Fatalf("job %+v: want project default, spider demo", j)
		}
	}
	p, r, d := byID["pending-1"], byID["running-1"], byID["finished-1"]
	if p.start != "" || p.finish != "" || p.log != "" {
		t.Fatalf("pending job %+v: want no start, finish or log (ScrapydWeb: pending is no start)", p)
	}
	wantStart := started.Local().Format("2006-01-02 15:04:05")
	if r.start != wantStart || r.finish != "" || r.log != "/logs/default/demo/running-1.log" || r.items != "/items/default/demo/running-1.jl" {
		t.Fatalf("running job %+v: want start %s, no finish, log and items links", r, wantStart)
	}
	if d.start != wantStart || d.finish != ended.Local().Format("2006-01-02 15:04:05") || d.runtime != "1:01:05" || d.pid != "" ||
		d.log != "/logs/default/demo/finished-1.log" || d.items != "/items/default/demo/finished-1.jl" {
		t.Fatalf("finished job %+v", d)
	}
}

// Twisted's directory listing as ScrapydWeb's Logs and Items pages read it (DIRECTORY_PATTERN and
// HREF_NAME_PATTERN in scrapydweb/vars.py).
var (
	swDirRE = regexp.MustCompile(`<tr\sclass="(?P<odd_even>odd|even)">\n` +
		`\s+<td>(?P<filename>.*?)</td>\n` +
		`\s+<td>(?P<size>.*?)</td>\n` +
		`(?:\s+<td>(?P<last_modified>.*?)</td>\n)?` +
		`\s+<td>(?P<content_type>.*?)</td>\n` +
		`\s+<td>(?P<content_encoding>.*?)</td>\n` +
		`</tr>`)
	swHrefNameRE = regexp.MustCompile(`href="(.+?)">(.+?)<`)
)

// parseListing returns a listing's entries (href -> name) as ScrapydWeb reads them.
func parseListing(t *testing.T, f *fixture, path string) map[string]string {
	t.Helper()
	code, page := f.get(t, path)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, page)
	}
	prefix := "/" + strings.Split(path, "/")[1] + "/"
	if !strings.Contains(page, "Directory listing for "+prefix) || !strings.Contains(page, "Directory listing for "+path) {
		t.Fatalf("GET %s: no \"Directory listing for %s\":\n%s", path, path, page)
	}
	out := map[string]string{}
	for _, m := range swDirRE.FindAllStringSubmatch(page, -1) {
		hn := swHrefNameRE.FindStringSubmatch(m[2])
		if hn == nil {
			t.Fatalf("GET %s: filename cell %q has no link", path, m[2])
		}
		out[hn[1]] = hn[2]
	}
	return out
}

func TestDirectoryListings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.schedule(t, "pending-1")
	done := f.schedule(t, "finished-1")
	started := time.Now().Add(-time.Minute)
	ended := time.Now()
	f.setRun(t, done, "succeeded", &started, &ended, 3, 2)

	for path, want := range map[string]map[string]string{
		"/logs/":               {"default/": "default/", "stats.json": "stats.json"},
		"/logs/default/":       {"demo/": "demo/"},
		"/logs/default/demo/":  {"finished-1.log": "finished-1.log", "finished-1.json": "finished-1.json"},
		"/items/":              {"default/": "default/"},
		"/items/default/":      {"demo/": "demo/"},
		"/items/default/demo/": {"finished-1.jl": "finished-1.jl"},
	} {
		got := parseListing(t, f, path)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("GET %s: ScrapydWeb reads %v, want %v", path, got, want)
		}
		// Every file link resolves against the listing's URL, as ScrapydWeb joins it.
		for href := range got {
			if strings.HasSuffix(href, "/") {
				continue
			}
			if code, b := f.get(t, path+href); code != 200 {
				t.Fatalf("GET %s%s: %d %s", path, href, code, b)
			}
		}
	}
	if code, _ := f.get(t, "/logs/nosuch/"); code != 404 {
		t.Fatalf("/logs/nosuch/: %d, want 404", code)
	}
}

// LogParser's output, from the run's figures: what ScrapydWeb's Stats page and its Jobs page
// (pages and items per job, from /logs/stats.json) read.
func TestLogParserJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	done := f.schedule(t, "finished-1")
	started := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	ended := started.Add(75 * time.Second)
	f.setRun(t, done, "succeeded", &started, &ended, 1255, 1200)

	code, body := f.get(t, "/logs/default/demo/finished-1.json")
	if code != 200 {
		t.Fatalf("job json: %d %s", code, body)
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(body), &js); err != nil {
		t.Fatal(err)
	}
	cs, _ := js["crawler_stats"].(map[string]any)
	cats, _ := js["log_categories"].(map[string]any)
	errLogs, _ := cats["error_logs"].(map[string]any)
	if js["logparser_version"] != "0.8.4" || js["pages"] != float64(1255) || js["items"] != float64(1200) || js["finish_reason"] != "finished" ||
		js["runtime"] != "0:01:15" || js["first_log_time"] != started.Local().Format("2006-01-02 15:04:05") ||
		cs["item_scraped_count"] != float64(1200) || cs["finish_reason"] != "finished" || errLogs["count"] != float64(0) {
		t.Fatalf("LogParser json: %s", body)
	}
	// ScrapydWeb's Stats page reads these keys unguarded (a missing one is a 500 there).
	for _, k := range []string{"latest_matches", "datas", "shutdown_reason", "last_update_time", "last_update_timestamp", "first_log_timestamp",
		"latest_log_timestamp", "crawler_engine", "head", "tail", "log_categories", "crawler_stats"} {
		if _, ok := js[k]; !ok {
			t.Fatalf("LogParser json lacks %q: %s", k, body)
		}
	}
	code, body = f.get(t, "/logs/stats.json")
	if code != 200 {
		t.Fatalf("stats.json: %d %s", code, body)
	}
	var st struct {
		Status           string                                          `json:"status"`
		LogparserVersion string                                          `json:"logparser_version"`
		Datas            map[string]map[string]map[string]map[string]any `json:"datas"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	d := st.Datas["default"]["demo"]["finished-1"]
	if st.Status != "ok" || st.LogparserVersion != "0.8.4" || d["pages"] != float64(1255) || d["items"] != float64(1200) || d["finish_reason"] != "finished" {
		t.Fatalf("stats.json: %s", body)
	}
}

// A run's items are served whole, past the 10,000 a single list reads.
func TestItemsServedWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.schedule(t, "big-1")
	started, ended := time.Now().Add(-time.Minute), time.Now()
	const n = 12000
	sink := items.NewPostgresSink(f.pool)
	for lo := 0; lo < n; lo += 1000 {
		batch := make([]items.Item, 0, 1000)
		for k := lo; k < lo+1000; k++ {
			batch = append(batch, items.Item{RunID: id, Spider: "demo", Key: fmt.Sprintf("k%05d", k), URL: "http://127.0.0.1/", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, k))})
		}
		if err := sink.Write(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	f.setRun(t, id, "succeeded", &started, &ended, n, n)
	code, body := f.get(t, "/items/default/demo/big-1.jl")
	if code != 200 {
		t.Fatalf("items: %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("items: %d lines, want %d", len(lines), n)
	}
	seen := map[int]bool{}
	for _, l := range lines {
		var it struct{ N int }
		if err := json.Unmarshal([]byte(l), &it); err != nil {
			t.Fatalf("item %q: %v", l, err)
		}
		seen[it.N] = true
	}
	if len(seen) != n {
		t.Fatalf("items: %d distinct, want %d", len(seen), n)
	}
}
