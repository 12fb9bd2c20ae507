package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"crawlq/internal/api"
	"crawlq/internal/spiderstore"
)

// projectEgg zips testdata/scrapyproject as an egg, in Go.
func projectEgg(t *testing.T) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "scrapyproject")
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

func TestProjectsThroughTheJSONAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *api.Config) {
		st, err := spiderstore.New(spiderstore.Config{Pool: c.Crawler.Pool(), Lister: spiderstore.StaticLister{}})
		if err != nil {
			t.Fatal(err)
		}
		c.Store = st
	})
	egg := base64.StdEncoding.EncodeToString(projectEgg(t))
	out := f.ok(t, `{"action":"addversion","project":"catalog","version":"v1","egg":"`+egg+`"}`)
	if out["spiders"] != float64(3) {
		t.Fatalf("addversion: %v", out)
	}
	if p := fmt.Sprint(f.ok(t, `{"action":"listprojects"}`)["projects"]); p != "[default catalog]" {
		t.Fatalf("listprojects: %s", p)
	}
	if v := fmt.Sprint(f.ok(t, `{"action":"listversions","project":"catalog"}`)["versions"]); v != "[v1]" {
		t.Fatalf("listversions: %s", v)
	}
	if s := fmt.Sprint(f.ok(t, `{"action":"listspiders","project":"catalog","_version":"v1"}`)["spiders"]); s != "[broken catalog exits]" {
		t.Fatalf("listspiders: %s", s)
	}
	sch := f.ok(t, `{"action":"schedule","project":"catalog","spider":"catalog","version":"v1","jobid":"abc-1",
		"setting":["DOWNLOAD_DELAY=1","CATALOG_TAG=x"],"args":{"base_url":"http://127.0.0.1:9"},"delay_seconds":3600}`)
	if sch["jobid"] != "abc-1" {
		t.Fatalf("schedule: %v", sch)
	}
	st := f.ok(t, `{"action":"status","job":"abc-1"}`)
	job := st["job"].(map[string]any)
	if st["currstate"] != "pending" || job["project"] != "catalog" || job["spider"] != "catalog" || job["version"] != "v1" ||
		job["log_url"] != "/logs/catalog/catalog/abc-1.log" || job["items_url"] != "/items/catalog/catalog/abc-1.jl" {
		t.Fatalf("status: %v", st)
	}
	lj := f.ok(t, `{"action":"listjobs","project":"catalog"}`)
	if p := lj["pending"].([]any); len(p) != 1 || p[0].(map[string]any)["id"] != "abc-1" {
		t.Fatalf("listjobs by project: %v", lj)
	}
	if p := f.ok(t, `{"action":"listjobs","project":"default"}`)["pending"].([]any); len(p) != 0 {
		t.Fatalf("listjobs of default lists the project's runs: %v", p)
	}
	ds := f.ok(t, `{"action":"daemonstatus"}`)
	if ds["pending"] != float64(1) || ds["finished"] != float64(0) {
		t.Fatalf("daemonstatus: %v", ds)
	}
	// A spec spider's run records the version it was pinned to at schedule; without a pin, the
	// version it starts with (TestSpecRunRecordsTheVersionItStarted), so none while it waits.
	spec := f.ok(t, `{"action":"schedule","spider":"demo","version":"1","args":{"base_url":"http://127.0.0.1:9"},"delay_seconds":3600}`)
	if j := f.ok(t, `{"action":"status","job":"`+spec["jobid"].(string)+`"}`)["job"].(map[string]any); j["version"] != "1" || j["project"] != "default" {
		t.Fatalf("spec run: %v", j)
	}
	unpinned := f.ok(t, `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:9"},"delay_seconds":3600}`)
	if j := f.ok(t, `{"action":"status","job":"`+unpinned["jobid"].(string)+`"}`)["job"].(map[string]any); j["version"] != nil {
		t.Fatalf("an unpinned run that has not started: %v, want no version yet", j)
	}

	runs, versions := f.count(t, "crawlq_run"), f.count(t, "crawlq_project_version")
	for _, c := range []struct{ payload, want string }{
		{`{"action":"schedule","project":"catalog","spider":"catalog","base_url":"x"}`, `unknown field "base_url"`},
		{`{"action":"schedule","project":"catalog","spider":"catalog","jobid":"abc-1"}`, "already used"},
		{`{"action":"schedule","project":"catalog","spider":"catalog","jobid":"123"}`, "not all digits"},
		{`{"action":"schedule","project":"catalog","spider":"catalog","setting":["nope"]}`, "NAME=VALUE"},
		{`{"action":"schedule","project":"catalog","spider":"catalog","setting":["FEEDS={}"]}`, "crawlq sets it"},
		{`{"action":"schedule","project":"catalog","spider":"catalog","setting":"x"}`, "field setting"},
		{`{"action":"schedule","project":"nope","spider":"catalog"}`, `unknown project "nope"`},
		{`{"action":"schedule","project":"catalog","spider":"nope"}`, "not found in project"},
		{`{"action":"schedule","project":"catalog","spider":"catalog","version":"v9"}`, "unknown version"},
		{`{"action":"schedule","spider":"demo","setting":["DOWNLOAD_DELAY=1"]}`, "for Scrapy spiders"},
		{`{"action":"schedule","spider":"demo","version":"7"}`, `unknown version "7" of spider "demo" (its versions: 1)`},
		{`{"action":"addversion","project":"catalog","version":"v2","egg":"bm90IGEgemlw"}`, "not a zip"},
		{`{"action":"addversion","project":"catalog","version":"v2"}`, "missing egg"},
		{`{"action":"addversion","project":"catalog","egg":"bm90"}`, "missing version"},
		{`{"action":"addversion","version":"v2","egg":"bm90"}`, "missing project"},
		{`{"action":"addversion","project":"default","version":"v2","egg":"` + egg + `"}`, "holds the pushed spider specs"},
		{`{"action":"addversion","project":"catalog","version":"v2","egg":"!!"}`, "field egg"},
		{`{"action":"delversion","project":"catalog","version":"v9"}`, "not found"},
		{`{"action":"delproject","project":"nope"}`, "not found"},
		{`{"action":"listversions","project":"nope"}`, "unknown project"},
		{`{"action":"pushspider","spec":"name: x\nbogus: 1\n"}`, "bogus: unknown field"},
		{`{"action":"status","job":"nope-1"}`, `unknown job "nope-1"`},
	} {
		out := f.call(t, c.payload)
		msg, _ := out["message"].(string)
		if out["status"] != "error" || !strings.Contains(msg, c.want) {
			t.Errorf("%.90s: got %v, want an error mentioning %q", c.payload, out, c.want)
		}
	}
	if r, v := f.count(t, "crawlq_run"), f.count(t, "crawlq_project_version"); r != runs || v != versions {
		t.Fatalf("bad input wrote runs (%d -> %d) or versions (%d -> %d)", runs, r, versions, v)
	}
	f.ok(t, `{"action":"delproject","project":"catalog"}`)
	if p := fmt.Sprint(f.ok(t, `{"action":"listprojects"}`)["projects"]); p != "[default]" {
		t.Fatalf("after delproject: %s", p)
	}
}

// A command spec pushed with pushspider, with no runtime or queue (the runners' long queue) or
// with runtime ecs, is scheduled to the long queue; one declared for the Lambda workers is
// refused at push, as docs/guide.md says.
func TestPushedCommandSpecSchedules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, spec := range []string{
		"name: cmd1\nkind: command\ncommand: [scrapy, crawl, cmd1]\n",
		"name: cmd2\nkind: command\ncommand: [scrapy, crawl, cmd2]\nruntime: ecs\n",
	} {
		raw, _ := json.Marshal(spec)
		f.ok(t, `{"action":"pushspider","spec":`+string(raw)+`}`)
	}
	for _, name := range []string{"cmd1", "cmd2"} {
		sch := f.ok(t, `{"action":"schedule","spider":"`+name+`","args":{"anything":"goes"},"delay_seconds":3600}`)
		var queue string
		if err := f.pool.QueryRow(context.Background(), `SELECT queue FROM crawlq_run WHERE id = $1`, sch["run_id"]).Scan(&queue); err != nil {
			t.Fatal(err)
		}
		if queue != "long" {
			t.Errorf("%s: run queued to %q, want long (the runners')", name, queue)
		}
	}
	for _, spec := range []string{
		"name: cmd3\nkind: command\ncommand: [scrapy, crawl, cmd3]\nruntime: lambda\n",
		"name: cmd4\nkind: command\ncommand: [scrapy, crawl, cmd4]\nqueue: crawl\n",
	} {
		raw, _ := json.Marshal(spec)
		if out := f.call(t, `{"action":"pushspider","spec":`+string(raw)+`}`); out["status"] != "error" {
			t.Errorf("push of %q: %v; want it refused", spec, out)
		}
	}
}
