package scrapyd_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// goEgg zips testdata/scrapyproject as an egg, in Go (the fixture's store reads its spiders
// from the sources).
func goEgg(t *testing.T) []byte {
	t.Helper()
	root := filepath.Join(repoRoot(t), "testdata", "scrapyproject")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("EGG-INFO/entry_points.txt")
	w.Write([]byte("[scrapy]\nsettings = catalog.settings\n"))
	err := filepath.Walk(filepath.Join(root, "catalog"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(p, ".py") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, _ := zw.Create(filepath.ToSlash(rel))
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

func (f *fixture) getJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	code, body := f.get(t, path)
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil || code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return out
}

// addVersionMultipart uploads an egg as scrapyd-client does.
func (f *fixture) addVersionMultipart(t *testing.T, project, version string, egg []byte) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("project", project)
	mw.WriteField("version", version)
	fw, _ := mw.CreateFormFile("egg", "project.egg")
	fw.Write(egg)
	mw.Close()
	resp, err := http.Post(f.base+"/addversion.json", mw.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// ScrapydWeb's Deploy posts the egg urlencoded (requests.post(url, data={'egg': bytes, ...})):
// the bytes arrive whole, binary ones included.
func TestAddVersionTakesAnUrlencodedEgg(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	egg := goEgg(t)
	var out map[string]any
	f.post(t, "/addversion.json", url.Values{"project": {"catalog"}, "version": {"1.0"}, "egg": {string(egg)}}, &out)
	if out["status"] != "ok" || out["spiders"] != float64(3) || out["version"] != "1.0" {
		t.Fatalf("urlencoded addversion: %v", out)
	}
	var sp map[string]any
	f.post(t, "/listspiders.json", url.Values{"project": {"catalog"}}, &sp)
	if sp["status"] != "ok" || len(sp["spiders"].([]any)) != 3 {
		t.Fatalf("listspiders: %v", sp)
	}
	f.post(t, "/addversion.json", url.Values{"project": {"catalog"}, "version": {"2.0"}, "egg": {"not a zip"}}, &out)
	if out["status"] != "error" {
		t.Fatalf("a urlencoded egg that is not a zip: %v", out)
	}
}

// The answers Scrapyd gives where crawlq's api has an error, and the fields Scrapyd 1.5 adds.
func TestScrapydAnswersOrdinaryOutcomes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if out := f.addVersionMultipart(t, "catalog", "1.0", goEgg(t)); out["status"] != "ok" {
		t.Fatalf("addversion: %v", out)
	}

	st := f.getJSON(t, "/status.json?job=no-such-job")
	if v, ok := st["currstate"]; !ok || v != nil || st["status"] != "ok" {
		t.Fatalf("status of an unknown job: %v; want currstate null", st)
	}
	var c map[string]any
	f.post(t, "/cancel.json", url.Values{"project": {"catalog"}, "job": {"no-such-job"}}, &c)
	if v, ok := c["prevstate"]; !ok || v != nil || c["status"] != "ok" {
		t.Fatalf("cancel of an unknown job: %v; want ok, prevstate null", c)
	}
	done := f.schedule(t, "done-1")
	started, ended := time.Now().Add(-time.Minute), time.Now()
	f.setRun(t, done, "succeeded", &started, &ended, 1, 1)
	f.post(t, "/cancel.json", url.Values{"project": {"default"}, "job": {"done-1"}}, &c)
	if v, ok := c["prevstate"]; !ok || v != nil || c["status"] != "ok" {
		t.Fatalf("cancel of a finished job: %v; want ok, prevstate null", c)
	}
	f.post(t, "/cancel.json", url.Values{"project": {"catalog"}, "job": {"done-1"}}, &c)
	if c["status"] != "error" {
		t.Fatalf("cancel of another project's job: %v; want an error", c)
	}
	lv := f.getJSON(t, "/listversions.json?project=nosuch")
	if lv["status"] != "ok" || lv["versions"] == nil || len(lv["versions"].([]any)) != 0 {
		t.Fatalf("listversions of an unknown project: %v; want ok, []", lv)
	}
	lp := f.getJSON(t, "/listprojects.json")
	if s := strings.Join(strs(lp["projects"]), ","); s != "catalog" {
		t.Fatalf("listprojects: %v; want crawlq's default project hidden", lp)
	}
	lp = f.getJSON(t, "/listprojects.json?all=1")
	if s := strings.Join(strs(lp["projects"]), ","); s != "default,catalog" {
		t.Fatalf("listprojects?all=1: %v; want default listed", lp)
	}

	// A pending job shows its version (null when not pinned), Scrapy settings and arguments.
	var sch map[string]any
	f.post(t, "/schedule.json", url.Values{"project": {"catalog"}, "spider": {"catalog"}, "jobid": {"pend-1"}, "_version": {"1.0"},
		"setting": {"DOWNLOAD_DELAY=2"}, "label": {"x"}}, &sch)
	f.post(t, "/schedule.json", url.Values{"project": {"catalog"}, "spider": {"catalog"}, "jobid": {"pend-2"}}, &sch)
	if sch["status"] != "ok" {
		t.Fatalf("schedule: %v", sch)
	}
	lj := f.getJSON(t, "/listjobs.json?project=catalog")
	byID := map[string]map[string]any{}
	for _, j := range lj["pending"].([]any) {
		m := j.(map[string]any)
		byID[m["id"].(string)] = m
	}
	p1, p2 := byID["pend-1"], byID["pend-2"]
	set1, _ := p1["settings"].(map[string]any)
	args1, _ := p1["args"].(map[string]any)
	if p1["version"] != "1.0" || set1["DOWNLOAD_DELAY"] != "2" || args1["label"] != "x" {
		t.Fatalf("pending job: %v; want version 1.0, settings and args", p1)
	}
	if v, ok := p2["version"]; !ok || v != nil || p2["settings"] == nil {
		t.Fatalf("pending job without a pinned version: %v; want version null, settings {}", p2)
	}
	// A finished job says how it ended and its dead pages.
	all := f.getJSON(t, "/listjobs.json?project=default")
	for _, j := range all["finished"].([]any) {
		m := j.(map[string]any)
		if m["id"] == "done-1" && (m["outcome"] != "succeeded" || m["dead_pages"] != float64(0)) {
			t.Fatalf("finished job: %v; want outcome succeeded, dead_pages 0", m)
		}
	}

	// CORS: Scrapyd's headers on every JSON answer, and a preflight answered with none of the
	// API's data.
	req, _ := http.NewRequest(http.MethodOptions, f.base+"/schedule.json", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 204 || len(b) != 0 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		resp.Header.Get("Access-Control-Allow-Methods") != "OPTIONS, HEAD, POST" || resp.Header.Get("Access-Control-Allow-Headers") != "X-Requested-With" {
		t.Fatalf("OPTIONS /schedule.json: %d %v %q", resp.StatusCode, resp.Header, b)
	}
	resp, err = http.Get(f.base + "/listjobs.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Methods") != "OPTIONS, HEAD, GET" {
		t.Fatalf("GET /listjobs.json headers: %v", resp.Header)
	}
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// Scrapyd takes the project names setuptools and scrapy.cfg allow (dots, quotes, spaces):
// `scrapyd-deploy` of a project named "shop.eu" or "my shop" works, and its jobs, logs and items
// are found under the name as given.
func TestProjectNamesAsScrapydTakesThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	egg := goEgg(t)
	for i, project := range []string{"shop.eu", "my shop", "v1.2-'beta'", "catalog"} {
		out := f.addVersionMultipart(t, project, "1.0", egg)
		if out["status"] != "ok" {
			t.Fatalf("addversion project %q: %v", project, out)
		}
		var sp map[string]any
		f.post(t, "/listspiders.json", url.Values{"project": {project}}, &sp)
		if sp["status"] != "ok" || len(strs(sp["spiders"])) != 3 {
			t.Fatalf("listspiders %q: %v", project, sp)
		}
		var sch map[string]any
		f.post(t, "/schedule.json", url.Values{"project": {project}, "spider": {"catalog"}, "jobid": {fmt.Sprintf("job-%d", i)}}, &sch)
		if sch["status"] != "ok" {
			t.Fatalf("schedule in %q: %v", project, sch)
		}
		jobs := f.getJSON(t, "/listjobs.json?project="+url.QueryEscape(project))
		pending, _ := jobs["pending"].([]any)
		if len(pending) != 1 || pending[0].(map[string]any)["project"] != project || pending[0].(map[string]any)["spider"] != "catalog" {
			t.Fatalf("listjobs %q: %v", project, jobs)
		}
		id, err := f.store.JobIDTaken(context.Background(), fmt.Sprintf("job-%d", i))
		if err != nil || id == 0 {
			t.Fatalf("job-%d: run %d, %v", i, id, err)
		}
		started, ended := time.Now().Add(-time.Minute), time.Now()
		f.setRun(t, id, "succeeded", &started, &ended, 3, 2)
		jobs = f.getJSON(t, "/listjobs.json?project="+url.QueryEscape(project))
		finished, _ := jobs["finished"].([]any)
		if len(finished) != 1 {
			t.Fatalf("listjobs %q: %v", project, jobs)
		}
		// The job's own log and items URLs lead to its files.
		for _, k := range []string{"log_url", "items_url"} {
			if code, b := f.get(t, finished[0].(map[string]any)[k].(string)); code != 200 {
				t.Fatalf("%s of a job in %q: %d %s", k, project, code, b)
			}
		}
	}
	var projects map[string]any
	f.post(t, "/listprojects.json", url.Values{}, &projects)
	got := strs(projects["projects"])
	for _, want := range []string{"shop.eu", "my shop", "v1.2-'beta'", "catalog"} {
		if !slices.Contains(got, want) {
			t.Fatalf("listprojects: %v, want %q in it", got, want)
		}
	}
	// The listing under /logs/ names each project as given, and its link leads to it.
	if got := parseListing(t, f, "/logs/"); got["shop.eu/"] != "shop.eu/" || got["my%20shop/"] != "my shop/" {
		t.Fatalf("/logs/: %v", got)
	}
	if code, b := f.get(t, "/logs/my%20shop/"); code != 200 || !strings.Contains(b, "catalog/") {
		t.Fatalf("/logs/my%%20shop/: %d %s", code, b)
	}
	for _, bad := range []string{"..", ".", "a/b", "a\nb", " lead", "trail ", "a\tb", strings.Repeat("p", 101)} {
		var out map[string]any
		f.post(t, "/addversion.json", url.Values{"project": {bad}, "version": {"1.0"}, "egg": {string(egg)}}, &out)
		if out["status"] != "error" || !strings.Contains(fmt.Sprint(out["message"]), "project") {
			t.Fatalf("addversion project %q: %v, want an error naming project", bad, out)
		}
	}
}
