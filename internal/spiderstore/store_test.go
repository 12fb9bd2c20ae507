package spiderstore_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/api"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/internal/testwait"
	"crawlq/spiders"
)

func newStore(t *testing.T) (*spiderstore.Store, context.Context) {
	t.Helper()
	st, err := spiderstore.New(spiderstore.Config{Pool: dbtest.Pool(t), Lister: spiderstore.StaticLister{}})
	if err != nil {
		t.Fatal(err)
	}
	return st, context.Background()
}

const goodSpec = `name: shop
start_urls: [http://127.0.0.1:9/]
items:
  - key: sku
    fields:
      sku: {css: span.sku}
`

func TestPushRefusesBadSpecsWithEveryErrorByPath(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	bad := `name: Bad Name
start_urls: [file:///etc/passwd]
follow:
  - css: "a["
    patern: x
items:
  - key: sku
    fields:
      sku: {cs: span.sku, attr: "no good"}
delay: soon
bogus: 1
`
	_, err := st.Push(ctx, spiderstore.File{Name: "bad.yaml", Data: []byte(bad)}, "")
	if !errors.Is(err, spiderstore.ErrInvalid) {
		t.Fatalf("push: %v, want ErrInvalid", err)
	}
	var ve *spider.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("push: %T %v, want a ValidationError inside", err, err)
	}
	paths := map[string]bool{}
	for _, fe := range ve.Errors {
		paths[fe.Path] = true
		if strings.Contains(fe.Msg, "spider.") || strings.Contains(fe.Msg, "type ") {
			t.Errorf("%s: %q names a Go type", fe.Path, fe.Msg)
		}
	}
	for _, want := range []string{"name", "start_urls[0]", "follow[0].css", "follow[0].patern", "items[0].fields.sku.cs",
		"items[0].fields.sku.attr", "delay", "bogus"} {
		if !paths[want] {
			t.Errorf("no error at %s; got %v", want, ve.Errors)
		}
	}
	if vs, err := st.Versions(ctx, "shop"); err != nil || len(vs) != 0 {
		t.Fatalf("a refused push stored %v", vs)
	}
}

// A refused PushAll unwraps to the problems alone: crawlq spider push lists each, and a bare
// "invalid" among them would be a problem that is not one.
func TestPushAllUnwrapsToTheProblemsOnly(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	_, err := st.PushAll(ctx, []spiderstore.File{
		{Name: "good.yaml", Data: []byte(goodSpec)},
		{Name: "re.yaml", Data: []byte("name: re\nstart_urls: [http://127.0.0.1:9/]\nfollow: [{pattern: '('}]\n")},
		{Name: "again.yaml", Data: []byte(goodSpec)},
	}, "")
	if !errors.Is(err, spiderstore.ErrInvalid) {
		t.Fatalf("push all: %v, want ErrInvalid", err)
	}
	if !strings.HasPrefix(err.Error(), "invalid: ") {
		t.Errorf("message %q: want it to begin %q", err, "invalid: ")
	}
	multi, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("%T does not unwrap to its problems", err)
	}
	var got []string
	for _, e := range multi.Unwrap() {
		got = append(got, e.Error())
	}
	if len(got) != 2 || !strings.Contains(got[0], "re.yaml: follow[0].pattern") || !strings.Contains(got[1], "again.yaml") {
		t.Fatalf("problems %q: want re.yaml's pattern and again.yaml's name, nothing else", got)
	}
}

func TestPushRefusesCommandSpidersNoRunnerTakes(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	for _, spec := range []string{
		"name: lam\nkind: command\ncommand: [scrapy, crawl, lam]\nruntime: lambda\n",
		"name: lam\nkind: command\ncommand: [scrapy, crawl, lam]\nqueue: crawl\n",
	} {
		_, err := st.Push(ctx, spiderstore.File{Name: "lam.yaml", Data: []byte(spec)}, "")
		if !errors.Is(err, spiderstore.ErrInvalid) || !strings.Contains(err.Error(), "Lambda workers") {
			t.Errorf("push %q: %v, want a refusal naming the Lambda workers", spec, err)
		}
	}
	if _, err := st.Push(ctx, spiderstore.File{Name: "ok.yaml", Data: []byte("name: lam\nkind: command\ncommand: [scrapy, crawl, lam]\n")}, ""); err != nil {
		t.Fatalf("a runnable command spider: %v", err)
	}
}

func TestVersions(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	p1, err := st.Push(ctx, spiderstore.File{Name: "shop.yaml", Data: []byte(goodSpec)}, "")
	if err != nil || p1.Version != "1" || p1.Unchanged {
		t.Fatalf("first push: %+v %v", p1, err)
	}
	same, err := st.Push(ctx, spiderstore.File{Name: "shop.yaml", Data: []byte(goodSpec)}, "")
	if err != nil || !same.Unchanged || same.Version != "1" {
		t.Fatalf("unchanged push: %+v %v", same, err)
	}
	changed := strings.Replace(goodSpec, "127.0.0.1:9", "127.0.0.1:10", 1)
	p2, err := st.Push(ctx, spiderstore.File{Name: "shop.yaml", Data: []byte(changed)}, "")
	if err != nil || p2.Version != "2" {
		t.Fatalf("second push: %+v %v", p2, err)
	}
	if _, err := st.Push(ctx, spiderstore.File{Name: "shop.yaml", Data: []byte(goodSpec)}, "2"); !errors.Is(err, spiderstore.ErrExists) {
		t.Fatalf("push to a taken version: %v", err)
	}
	got, err := st.Get(ctx, "shop", "")
	if err != nil || got.Version != "2" || string(got.Data) != changed {
		t.Fatalf("latest: %+v %v", got, err)
	}
	vs, err := st.Versions(ctx, "shop")
	if err != nil || len(vs) != 2 || vs[0].Version != "1" || vs[1].Version != "2" {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	for i, data := range []string{goodSpec, changed} {
		if sum := sha256.Sum256([]byte(data)); vs[i].SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("version %s's hash %q, want that of what was pushed", vs[i].Version, vs[i].SHA256)
		}
	}
	if vs[0].PushedAt.IsZero() || vs[1].PushedAt.Before(vs[0].PushedAt) {
		t.Errorf("push times %v, %v: want set, oldest first", vs[0].PushedAt, vs[1].PushedAt)
	}
	// The source of the registry: any version by name, the newest by default.
	for version, want := range map[string]string{"1": goodSpec, "2": changed, "": changed} {
		res, err := st.Resolve(ctx, "shop", version)
		if err != nil || string(res.Spec) != want || (version != "" && res.Version != version) {
			t.Fatalf("resolve version %q: %+v %v", version, res, err)
		}
	}
	_, err = st.Resolve(ctx, "shop", "7")
	if !errors.Is(err, spider.ErrUnknownVersion) || !strings.Contains(err.Error(), `unknown version "7" of spider "shop" (its versions: 1, 2)`) {
		t.Fatalf("resolve version 7: %v", err)
	}
	if _, err := st.Resolve(ctx, "nope", "1"); !errors.Is(err, spider.ErrUnknownSpider) {
		t.Fatalf("resolve a version of an unknown spider: %v", err)
	}
	// Past ten versions the error names the newest ten.
	for v := 2; v <= 12; v++ {
		if _, err := st.Push(ctx, spiderstore.File{Name: "many.yaml", Data: []byte(strings.Replace(goodSpec, "name: shop", "name: many", 1) + fmt.Sprintf("# %d\n", v))}, strconv.Itoa(v)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err = st.Resolve(ctx, "many", "1"); !strings.Contains(fmt.Sprint(err), `(its versions: ..., 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)`) {
		t.Fatalf("resolve version 1 of a spider with versions 2 to 12: %v", err)
	}
	if n, err := st.Delete(ctx, "shop", "2"); err != nil || n != 1 {
		t.Fatalf("delete version: %d %v", n, err)
	}
	if got, err := st.Get(ctx, "shop", ""); err != nil || got.Version != "1" {
		t.Fatalf("after deleting 2, latest is %q", got.Version)
	}
	if _, err := st.Delete(ctx, "nope", ""); !errors.Is(err, spiderstore.ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
	// All or nothing: one bad file and the good one is not stored either.
	_, err = st.PushAll(ctx, []spiderstore.File{{Name: "a.yaml", Data: []byte(strings.Replace(goodSpec, "shop", "other", 1))},
		{Name: "b.yaml", Data: []byte("name: x\nstart_urls: []\n")}}, "")
	if !errors.Is(err, spiderstore.ErrInvalid) || !strings.Contains(err.Error(), "b.yaml") {
		t.Fatalf("push all: %v", err)
	}
	if vs, err := st.Versions(ctx, "other"); err != nil || len(vs) != 0 {
		t.Fatalf("push all stored %v despite a bad file", vs)
	}
}

func TestSeedPushesBuiltinsOnce(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	n, err := st.Seed(ctx, spiders.FS)
	if err != nil || n < 1 {
		t.Fatalf("seed: %d %v", n, err)
	}
	if n2, err := st.Seed(ctx, spiders.FS); err != nil || n2 != 0 {
		t.Fatalf("second seed: %d %v", n2, err)
	}
	if got, err := st.Get(ctx, "demo", ""); err != nil || got.Version != "1" {
		t.Fatalf("demo: %+v %v", got, err)
	}
}

// egg builds a minimal project egg in Go.
// add writes one file into a zip.
func add(t *testing.T, zw *zip.Writer, name, body string) {
	t.Helper()
	w, err := zw.Create(name)
	if err == nil {
		_, err = w.Write([]byte(body))
	}
	if err != nil {
		t.Fatal(err)
	}
}

func egg(t *testing.T, entry string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if entry != "" {
		add(t, zw, "EGG-INFO/entry_points.txt", entry)
	}
	for name, body := range files {
		add(t, zw, name, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestProjectVersions(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	good := egg(t, "[scrapy]\nsettings = shop.settings\n", map[string]string{
		"shop/spiders/a.py": "class A(scrapy.Spider):\n    name = 'alpha'\n",
		"shop/spiders/b.py": "class B(scrapy.Spider):\n    name = \"beta\"\n",
	})
	sp, err := st.AddVersion(ctx, "shop", "r1", good)
	if err != nil || strings.Join(sp, ",") != "alpha,beta" {
		t.Fatalf("add version: %v %v", sp, err)
	}
	for _, c := range []struct {
		project, version string
		egg              []byte
		want             string
	}{
		{"shop", "r2", []byte("not a zip"), "not a zip"},
		{"shop", "r2", egg(t, "", nil), "entry_points.txt"},
		{"shop", "r2", egg(t, "[console_scripts]\nx = y\n", nil), "settings entry point"},
		{"sh/op", "r2", good, "project"},
		{"shop", "", good, "version"},
		{"shop", "r2", nil, "empty"},
	} {
		if _, err := st.AddVersion(ctx, c.project, c.version, c.egg); !errors.Is(err, spiderstore.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("add %q %q: %v, want an error about %s", c.project, c.version, err, c.want)
		}
	}
	if vs, err := st.ProjectVersions(ctx, "shop"); err != nil || strings.Join(vs, ",") != "r1" {
		t.Fatalf("refused uploads stored versions: %v", vs)
	}
	b, err := st.Egg(ctx, "shop", "r1")
	if err != nil || !bytes.Equal(b, good) {
		t.Fatalf("egg round trip: %v", err)
	}
	res, err := st.Resolve(ctx, "shop.beta", "")
	if err != nil || res.Command == nil || res.Version != "r1" || strings.Join(res.Command.Command, " ") != "scrapy crawl beta" {
		t.Fatalf("resolve shop.beta: %+v %v", res, err)
	}
	if _, err := st.Resolve(ctx, "shop.gamma", ""); !errors.Is(err, spider.ErrUnknownSpider) {
		t.Fatalf("resolve unknown: %v", err)
	}
	// A pinned project version: the one asked for, if it holds the spider.
	only := egg(t, "[scrapy]\nsettings = shop.settings\n", map[string]string{"shop/spiders/a.py": "class A(scrapy.Spider):\n    name = 'alpha'\n"})
	if _, err := st.AddVersion(ctx, "shop", "r2", only); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Resolve(ctx, "shop.alpha", "r1"); err != nil || res.Version != "r1" {
		t.Fatalf("resolve shop.alpha at r1: %+v %v", res, err)
	}
	if res, err := st.Resolve(ctx, "shop.alpha", ""); err != nil || res.Version != "r2" {
		t.Fatalf("resolve shop.alpha, the newest: %+v %v", res, err)
	}
	if res, err := st.Resolve(ctx, "shop.beta", ""); err != nil || res.Version != "r1" {
		t.Fatalf("resolve shop.beta, the newest version holding it: %+v %v", res, err)
	}
	for _, v := range []string{"r2", "r9"} {
		if _, err := st.Resolve(ctx, "shop.beta", v); !errors.Is(err, spider.ErrUnknownVersion) || !strings.Contains(err.Error(), `"`+v+`"`) {
			t.Fatalf("resolve shop.beta at %s: %v, want ErrUnknownVersion naming it", v, err)
		}
	}
	if err := st.DeleteProject(ctx, "shop", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Resolve(ctx, "shop.beta", ""); !errors.Is(err, spider.ErrUnknownSpider) {
		t.Fatalf("resolve after delete: %v", err)
	}
}

// TestPushedSpiderRunsOnRunningWorkers pushes a spider while a worker node runs and schedules
// it through the api: the running node crawls it, without a restart, and a second push (a new
// version) is what the next run uses.
func TestPushedSpiderRunsOnRunningWorkers(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site := demosite.New(demosite.Config{Items: 30, SlowDelay: time.Millisecond})
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	finished := make(chan int64, 4)
	reg := spider.NewRegistry() // no built-ins in-process: only what the store holds
	n, err := node.New(node.Config{Pool: pool, Spiders: reg, Workers: 4, Fetch: fetch.Config{AllowLoopback: true}, OnFinish: func(id int64, _ string) { finished <- id }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()

	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders})
	if err != nil {
		t.Fatal(err)
	}
	spec := `name: pushed
start_urls: [http://` + addr.String() + `/]
follow: [{css: a}]
items:
  - match: 'item-\d+\.html$'
    css: div.product
    key: sku
    fields: {sku: {css: span.sku, required: true}}
`
	if out := a.Run(ctx, &api.Request{Action: api.ActSchedule, Spider: "pushed"}); out["status"] != "error" {
		t.Fatalf("schedule before push: %v", out)
	}
	if out := a.Run(ctx, &api.Request{Action: api.ActPushSpider, Spec: spec}); out["status"] != "ok" || out["version"] != "1" {
		t.Fatalf("pushspider: %v", out)
	}
	run := func(wantItems int) {
		t.Helper()
		// The registry's source TTL is 2s: real time passes here, as it does in a deployed node.
		asked := time.Now()
		out := testwait.For(t, "a schedule of the pushed spider", func() (api.Response, bool) {
			out := a.Run(ctx, &api.Request{Action: api.ActSchedule, Spider: "pushed"})
			return out, out["status"] == "ok"
		})
		if d := time.Since(asked); d > 5*time.Second {
			t.Errorf("the pushed spider was schedulable %s after the push; want within its 2s TTL and some", d)
		}
		id := out["run_id"].(int64)
		select {
		case got := <-finished:
			if got != id {
				t.Fatalf("finished run %d, want %d", got, id)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the running node did not finish the pushed spider's run")
		}
		r, err := n.Crawler.Get(ctx, id)
		if err != nil || r.State != "succeeded" || r.Stats.Items != int64(wantItems) {
			t.Fatalf("run: %+v %v, want succeeded with %d items", r, err, wantItems)
		}
	}
	run(30)
	// Version 2 caps the crawl: the next run must use it.
	if out := a.Run(ctx, &api.Request{Action: api.ActPushSpider, Spec: spec + "max_pages: 3\n"}); out["version"] != "2" {
		t.Fatalf("second push: %v", out)
	}
	testwait.Until(t, "the running node sees version 2", func() bool { return n.Spiders.Version("pushed") == "2" })
	r := a.Run(ctx, &api.Request{Action: api.ActSchedule, Spider: "pushed"})
	id := r["run_id"].(int64)
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatal("second run did not finish")
	}
	got, err := n.Crawler.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stats.Pages > 3 {
		t.Fatalf("second run fetched %d pages: version 2 (max_pages 3) was not used", got.Stats.Pages)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A version a run that has not finished needs is not deleted from under it: the delete is
// refused, naming the runs, and deletes nothing. Once the run has finished it goes.
func TestDeleteKeepsVersionsUnfinishedRunsNeed(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	st, err := spiderstore.New(spiderstore.Config{Pool: pool, Lister: spiderstore.StaticLister{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, spec := range []string{goodSpec, strings.Replace(goodSpec, "127.0.0.1:9", "127.0.0.1:10", 1)} {
		if _, err := st.Push(ctx, spiderstore.File{Name: "shop.yaml", Data: []byte(spec)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	// A pending run pinned to version 1, as `crawlq schedule --version 1` leaves it.
	var run int64
	if err := pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue) VALUES ('shop', 'crawl') RETURNING id`).Scan(&run); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_spider_run (run_id, spider, version) VALUES ($1, 'shop', '1')`, run); err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"1", ""} {
		n, err := st.Delete(ctx, "shop", version)
		if !errors.Is(err, spiderstore.ErrInUse) || n != 0 || !strings.Contains(err.Error(), fmt.Sprintf("(%d)", run)) {
			t.Fatalf("delete version %q under a pending run: %d %v", version, n, err)
		}
	}
	if vs, err := st.Versions(ctx, "shop"); err != nil || versionNames(vs) != "1,2" {
		t.Fatalf("versions after refused deletes: %v %v", vs, err)
	}
	// Version 2 no unfinished run needs.
	if n, err := st.Delete(ctx, "shop", "2"); err != nil || n != 1 {
		t.Fatalf("delete version 2: %d %v", n, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE crawlq_run SET state = 'succeeded' WHERE id = $1`, run); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Delete(ctx, "shop", "1"); err != nil || n != 1 {
		t.Fatalf("delete version 1 after its run finished: %d %v", n, err)
	}
}

// versionNames joins the versions' names with commas.
func versionNames(vs []spiderstore.Version) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Version
	}
	return strings.Join(names, ",")
}
