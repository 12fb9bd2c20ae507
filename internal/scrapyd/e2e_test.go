package scrapyd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/testwait"
)

// python is Debian's interpreter, the one python3-scrapy installs into (a pyenv python3 on PATH
// has no Scrapy).
const python = "/usr/bin/python3"

// requireScrapy fails the test loudly when Scrapy is missing: these tests exist to run it.
func requireScrapy(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import scrapy; print(scrapy.__version__)").CombinedOutput(); err != nil {
		t.Fatalf("Scrapy is missing (%v: %s): install Debian's python3-scrapy (scripts/deps.sh test)", err, out)
	}
	if _, err := os.Stat("/usr/bin/scrapy"); err != nil {
		t.Fatalf("/usr/bin/scrapy is missing: install Debian's python3-scrapy (scripts/deps.sh test)")
	}
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func buildCrawlq(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "crawlq")
	// Built as the runner image's binary is (make image), like every crawlq binary the tests
	// build: they then share one set of compiled packages.
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/crawlq")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// buildEgg packages testdata/scrapyproject as scrapyd-deploy does (setup.py bdist_egg).
func buildEgg(t *testing.T) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), "testdata", "scrapyproject")
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-r", src, dir).CombinedOutput(); err != nil {
		t.Fatalf("copy project: %v %s", err, out)
	}
	proj := filepath.Join(dir, "scrapyproject")
	cmd := exec.Command(python, "setup.py", "-q", "bdist_egg", "-d", filepath.Join(dir, "dist"))
	cmd.Dir = proj
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bdist_egg: %v\n%s", err, out)
	}
	eggs, _ := filepath.Glob(filepath.Join(dir, "dist", "*.egg"))
	if len(eggs) != 1 {
		t.Fatalf("bdist_egg made %v", eggs)
	}
	return eggs[0]
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stack is `crawlq local` (with its in-process runner) as a child process.
type stack struct {
	base, user, pass string
	cmd              *exec.Cmd
	mu               sync.Mutex
	stderr           bytes.Buffer
}

func startLocal(t *testing.T, bin, dbURL string) *stack {
	t.Helper()
	s := &stack{user: "scrapy", pass: "s3cret-pass"}
	scrapydAddr := freeAddr(t)
	s.base = "http://" + scrapydAddr
	s.cmd = exec.Command(bin, "local", "--addr", freeAddr(t), "--scrapyd-addr", scrapydAddr, "--tick", "1s", "--runners", "2",
		"--scrapyd-max-upload", fmt.Sprint(1<<20))
	s.cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "PATH=/usr/bin:"+os.Getenv("PATH"),
		"CRAWLQ_SCRAPYD_USERNAME="+s.user, "CRAWLQ_SCRAPYD_PASSWORD="+s.pass, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	pr, pw := io.Pipe()
	s.cmd.Stderr = pw
	s.cmd.Stdout = io.Discard
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.Write(sc.Bytes())
			s.stderr.WriteByte('\n')
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- s.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
		pw.Close()
		if t.Failed() {
			s.mu.Lock()
			out := s.stderr.String()
			s.mu.Unlock()
			if len(out) > 20000 {
				out = out[len(out)-20000:]
			}
			t.Logf("crawlq local stderr (tail):\n%s", out)
		}
	})
	testwait.Until(t, "crawlq local's Scrapyd API is up", func() bool {
		var out map[string]any
		code := s.call(t, "GET", "/daemonstatus.json", nil, &out)
		return code == 200 && out["status"] == "ok"
	})
	return s
}

// call sends a request (form: urlencoded body for POST, query for GET) and decodes the JSON answer.
func (s *stack) call(t *testing.T, method, path string, form url.Values, out any) int {
	t.Helper()
	var body io.Reader
	target := s.base + path
	if method == "GET" && form != nil {
		target += "?" + form.Encode()
	} else if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, target, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.SetBasicAuth(s.user, s.pass)
	return s.do(t, req, out)
}

func (s *stack) do(t *testing.T, req *http.Request, out any) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: not JSON (%d): %s", req.Method, req.URL.Path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

func (s *stack) get(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	req.SetBasicAuth(s.user, s.pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

func (s *stack) addVersion(t *testing.T, project, version string, egg []byte) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("project", project)
	mw.WriteField("version", version)
	fw, _ := mw.CreateFormFile("egg", "project.egg")
	fw.Write(egg)
	mw.Close()
	req, _ := http.NewRequest("POST", s.base+"/addversion.json", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.SetBasicAuth(s.user, s.pass)
	var out map[string]any
	s.do(t, req, &out)
	return out
}

// waitFinished polls listjobs.json until the job is finished and returns its entry.
func (s *stack) waitFinished(t *testing.T, project, jobid string, within time.Duration) map[string]any {
	t.Helper()
	var job map[string]any
	testwait.ForAtMost(t, within, fmt.Sprintf("job %s finished", jobid), func() (map[string]any, bool) {
		var out map[string]any
		s.call(t, "GET", "/listjobs.json", url.Values{"project": {project}}, &out)
		for _, j := range asList(out["finished"]) {
			if j["id"] == jobid {
				job = j
				return out, true
			}
		}
		return out, false
	})
	return job
}

func asList(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, x := range l {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// TestScrapyProjectThroughScrapydAPI deploys a plain Scrapy project through addversion.json,
// schedules its spiders through schedule.json with arguments and settings, and checks what the
// runs did against the demo site: the exact items, real page and error stats, the log at
// log_url, and the outcome of a spider whose callbacks raise and of one that exits 1. Then a
// standard-library Python client checks every endpoint's shape and error answers.
func TestScrapyProjectThroughScrapydAPI(t *testing.T) {
	requireScrapy(t)
	bin := buildCrawlq(t)
	eggPath := buildEgg(t)
	egg, err := os.ReadFile(eggPath)
	if err != nil {
		t.Fatal(err)
	}
	_, dbURL := dbtest.Schema(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site := demosite.New(demosite.Config{Items: 96, SlowDelay: time.Millisecond})
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	siteURL := "http://" + addr.String()
	s := startLocal(t, bin, dbURL)

	began := time.Now()
	out := s.addVersion(t, "catalog", "v1", egg)
	t.Logf("addversion (egg %d bytes, `scrapy list` on it): %s", len(egg), time.Since(began).Round(time.Millisecond))
	if out["status"] != "ok" || out["spiders"] != float64(3) || out["project"] != "catalog" || out["version"] != "v1" {
		t.Fatalf("addversion: %v", out)
	}
	var spiders map[string]any
	s.call(t, "GET", "/listspiders.json", url.Values{"project": {"catalog"}}, &spiders)
	if fmt.Sprint(spiders["spiders"]) != "[broken catalog exits]" {
		t.Fatalf("listspiders: %v", spiders)
	}

	t.Run("catalog", func(t *testing.T) {
		site.ResetHits()
		var sch map[string]any
		s.call(t, "POST", "/schedule.json", url.Values{"project": {"catalog"}, "spider": {"catalog"}, "jobid": {"job-catalog-1"},
			"base_url": {siteURL}, "label": {"hello"}, "setting": {"CATALOG_TAG=t1", "DOWNLOAD_DELAY=0"}, "_version": {"v1"}}, &sch)
		if sch["status"] != "ok" || sch["jobid"] != "job-catalog-1" {
			t.Fatalf("schedule: %v", sch)
		}
		began := time.Now()
		j := s.waitFinished(t, "catalog", "job-catalog-1", 3*time.Minute)
		t.Logf("catalog run: schedule to finished %s (start_time %v, end_time %v)", time.Since(began).Round(time.Millisecond), j["start_time"], j["end_time"])
		want := site.Expected().Items
		stats, _ := j["stats"].(map[string]any)
		if j["state"] != "succeeded" || j["items"] != float64(want) || j["spider"] != "catalog" || j["project"] != "catalog" || j["version"] != "v1" {
			t.Fatalf("finished job: %v (want %d items, succeeded)", j, want)
		}
		if pages := stats["pages"]; pages != float64(site.TotalHits()) || stats["errors"] != float64(0) {
			t.Fatalf("stats %v: want pages = the site's %d hits, 0 errors", stats, site.TotalHits())
		}
		if j["pid"] == nil || j["start_time"] == nil || j["end_time"] == nil {
			t.Fatalf("finished job lacks pid/start_time/end_time: %v", j)
		}
		if j["log_url"] != "/logs/catalog/catalog/job-catalog-1.log" || j["items_url"] != "/items/catalog/catalog/job-catalog-1.jl" {
			t.Fatalf("urls: %v %v", j["log_url"], j["items_url"])
		}
		itemsText := s.get(t, j["items_url"].(string))
		lines := strings.Split(strings.TrimSpace(itemsText), "\n")
		if len(lines) != want {
			t.Fatalf("items_url: %d lines, want %d", len(lines), want)
		}
		for _, l := range lines {
			var it map[string]any
			if err := json.Unmarshal([]byte(l), &it); err != nil || it["tag"] != "t1" || it["label"] != "hello" || it["key"] == nil {
				t.Fatalf("item %s: want tag t1 (setting) and label hello (argument)", l)
			}
		}
		log := s.get(t, j["log_url"].(string))
		for _, w := range []string{"Spider closed (finished)", "[crawlq] INFO: scrapy stats: item_scraped_count=" + fmt.Sprint(want), "label=hello", "CATALOG_TAG=t1"} {
			if !strings.Contains(log, w) {
				t.Fatalf("log lacks %q:\n%s", w, log)
			}
		}
		checkLogParserReads(t, log, want)

		// ScrapydWeb's Jobs page lists the run as finished, with its log and items links.
		var found *swJob
		for _, sj := range parseJobsPage(t, s.get(t, "/jobs")) {
			if sj.job == "job-catalog-1" {
				found = &sj
			}
		}
		if found == nil || found.project != "catalog" || found.spider != "catalog" || found.start == "" || found.finish == "" ||
			found.log != j["log_url"] || found.items != j["items_url"] {
			t.Fatalf("/jobs: ScrapydWeb reads %+v for job-catalog-1", found)
		}
		// Its Logs page lists the log, and its Stats page reads LogParser's JSON of it.
		if !strings.Contains(s.get(t, "/logs/catalog/catalog/"), `<a href="job-catalog-1.log">job-catalog-1.log</a>`) {
			t.Fatal("/logs/catalog/catalog/ does not list job-catalog-1.log")
		}
		var lp map[string]any
		if err := json.Unmarshal([]byte(s.get(t, "/logs/catalog/catalog/job-catalog-1.json")), &lp); err != nil {
			t.Fatal(err)
		}
		if lp["items"] != float64(want) || lp["pages"] != stats["pages"] || lp["finish_reason"] != "finished" || lp["logparser_version"] != "0.8.4" {
			t.Fatalf("LogParser json: %v", lp)
		}
	})

	t.Run("2400 items", func(t *testing.T) {
		// A run whose items (several times items_url's 64 KB write buffer; its one statement
		// streams them, so no list limit is crossed: TestItemsServedWhole serves 12,000) and log
		// are served whole, while Scrapy runs 32 requests at a time through crawlq's hook.
		const n = 2400
		big := demosite.New(demosite.Config{Items: n, PerPage: 100, SlowDelay: time.Millisecond})
		addr, err := big.Serve(ctx, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var sch map[string]any
		s.call(t, "POST", "/schedule.json", url.Values{"project": {"catalog"}, "spider": {"catalog"}, "jobid": {"job-big-1"},
			"base_url": {"http://" + addr.String()}, "setting": {"CONCURRENT_REQUESTS=32", "CONCURRENT_REQUESTS_PER_DOMAIN=32"}}, &sch)
		if sch["status"] != "ok" {
			t.Fatalf("schedule: %v", sch)
		}
		began := time.Now()
		j := s.waitFinished(t, "catalog", "job-big-1", 10*time.Minute)
		t.Logf("%d-item run: schedule to finished %s", n, time.Since(began).Round(time.Second))
		if j["state"] != "succeeded" || j["items"] != float64(n) {
			t.Fatalf("job: %v; want succeeded with %d items", j, n)
		}
		itemsText := s.get(t, j["items_url"].(string))
		t.Logf("items_url: %d bytes", len(itemsText))
		if lines := strings.Count(itemsText, "\n"); lines != n {
			t.Fatalf("items_url: %d lines, want %d", lines, n)
		}
		log := s.get(t, j["log_url"].(string))
		t.Logf("log: %d lines, %d bytes", strings.Count(log, "\n"), len(log))
		checkLogParserReads(t, log, n)
	})

	t.Run("callbacks raise", func(t *testing.T) {
		var sch map[string]any
		s.call(t, "POST", "/schedule.json", url.Values{"project": {"catalog"}, "spider": {"broken"}, "base_url": {siteURL}}, &sch)
		if sch["status"] != "ok" {
			t.Fatalf("schedule: %v", sch)
		}
		j := s.waitFinished(t, "catalog", sch["jobid"].(string), 3*time.Minute)
		raised := 0 // items 7, 17, ..., whose callback raises
		for k := 1; k <= 96; k++ {
			if k%10 == 7 {
				raised++
			}
		}
		stats, _ := j["stats"].(map[string]any)
		byKind, _ := stats["errors_by_kind"].(map[string]any)
		errMsg, _ := j["error"].(string)
		if j["state"] != "failed" || j["items"] != float64(96-raised) || stats["errors"] != float64(raised) ||
			byKind["spider_exception"] != float64(raised) || !strings.Contains(errMsg, fmt.Sprintf("%d exceptions in spider callbacks", raised)) {
			t.Fatalf("job: %v; want failed with %d items and %d spider exceptions", j, 96-raised, raised)
		}
		if pages, _ := stats["pages"].(float64); pages < 96 {
			t.Fatalf("pages %v: want every page fetched", stats["pages"])
		}
		if log := s.get(t, j["log_url"].(string)); !strings.Contains(log, "ValueError: cannot parse") {
			t.Fatalf("log lacks the traceback:\n%s", log)
		}
	})

	t.Run("exits 1", func(t *testing.T) {
		var sch map[string]any
		s.call(t, "POST", "/schedule.json", url.Values{"project": {"catalog"}, "spider": {"exits"}, "base_url": {siteURL}}, &sch)
		if sch["status"] != "ok" {
			t.Fatalf("schedule: %v", sch)
		}
		j := s.waitFinished(t, "catalog", sch["jobid"].(string), 3*time.Minute)
		errMsg, _ := j["error"].(string)
		if j["state"] != "failed" || !strings.Contains(errMsg, "exit status 1") {
			t.Fatalf("job: %v; want failed with exit status 1", j)
		}
		if log := s.get(t, j["log_url"].(string)); !strings.Contains(log, "giving up on") {
			t.Fatalf("log lacks the spider's last words:\n%s", log)
		}
	})

	// The version scrapyd-deploy --version GIT sends from a branch holds a slash, which must not
	// reach the egg's file name when the version runs.
	t.Run("git branch version", func(t *testing.T) {
		const v = "r12-feature/login"
		if out := s.addVersion(t, "catalog", v, egg); out["status"] != "ok" || out["version"] != v {
			t.Fatalf("addversion %s: %v", v, out)
		}
		var sch map[string]any
		s.call(t, "POST", "/schedule.json", url.Values{"project": {"catalog"}, "spider": {"catalog"}, "_version": {v},
			"base_url": {siteURL}, "setting": {"DOWNLOAD_DELAY=0"}}, &sch)
		if sch["status"] != "ok" {
			t.Fatalf("schedule: %v", sch)
		}
		j := s.waitFinished(t, "catalog", sch["jobid"].(string), 3*time.Minute)
		if j["state"] != "succeeded" || j["version"] != v {
			t.Fatalf("job: %v; want succeeded with version %s", j, v)
		}
		var del map[string]any
		s.call(t, "POST", "/delversion.json", url.Values{"project": {"catalog"}, "version": {v}}, &del)
		if del["status"] != "ok" {
			t.Fatalf("delversion %s: %v", v, del)
		}
	})

	t.Run("python client", func(t *testing.T) {
		script := filepath.Join(repoRoot(t), "testdata", "scrapyd_client_test.py")
		cmd := exec.Command(python, script)
		cmd.Env = append(os.Environ(), "SCRAPYD_URL="+s.base, "SCRAPYD_USER="+s.user, "SCRAPYD_PASS="+s.pass,
			"EGG="+eggPath, "SITE_URL="+siteURL, "MAX_UPLOAD="+fmt.Sprint(1<<20))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("python client: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "ALL CHECKS PASSED") {
			t.Fatalf("python client did not finish:\n%s", out)
		}
		t.Logf("python client:\n%s", out)
	})
}

// checkLogParserReads reads a served log with LogParser's patterns (logparser/common.py, 0.8.4):
// a line starts with Scrapy's time (first_log_time), its LogStats lines give the pages chart, and the
// stats dump at the end (PATTERN_LOG_ENDING) gives the item count and the finish reason.
func checkLogParserReads(t *testing.T, log string, items int) {
	t.Helper()
	entry := regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} `)
	if !regexp.MustCompile(`(?m)^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} `).MatchString(log) {
		t.Fatalf("no line starts with Scrapy's time: LogParser finds no first_log_time:\n%.300s", log)
	}
	datas := regexp.MustCompile(`\n(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) .+?Crawled (\d+) pages \(at (\d+) pages/min\), scraped (\d+) items \(at (\d+) items/min\)`)
	if !datas.MatchString("\n" + log) {
		t.Fatalf("LogParser finds no LogStats line (pages and items)")
	}
	ending := regexp.MustCompile(`(?s)(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) [^\n]+?Dumping Scrapy stats:.*?(\{.+\})`)
	m := ending.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("LogParser finds no stats dump")
	}
	if !strings.Contains(m[2], fmt.Sprintf("'item_scraped_count': %d,", items)) || !strings.Contains(m[2], "'finish_reason': 'finished'") {
		t.Fatalf("LogParser's crawler_stats lack item_scraped_count %d or finish_reason finished:\n%.2000s", items, m[2])
	}
	// crawlq's own lines (its lines about the command, the run's events) are log entries of
	// their own, not a continuation of Scrapy's.
	for _, l := range strings.Split(log, "\n") {
		if (strings.Contains(l, "crawlq: ") || strings.HasPrefix(l, "state ")) && !entry.MatchString(l) {
			t.Fatalf("crawlq line %q is not in Scrapy's format", l)
		}
	}
	if !regexp.MustCompile(`(?m)^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \[crawlq\] INFO: state running$`).MatchString(log) {
		t.Fatalf("the log lacks the run's event as a Scrapy line ([crawlq] INFO: state running)")
	}
}
