package security

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

// Spider specs that would read local files or reach the metadata service are rejected when the
// spec is loaded, naming the field; allow_private lifts only the metadata rule, never file://.
func TestSpecsRejectLocalFilesAndMetadata(t *testing.T) {
	t.Parallel()
	cases := []struct {
		start        string
		allowPrivate bool
		ok           bool
	}{
		{"file:///etc/passwd", false, false},
		{"file:///etc/passwd", true, false},
		{"FILE:///etc/shadow", true, false},
		{"gopher://127.0.0.1:6379/_FLUSHALL", true, false},
		{"ftp://127.0.0.1/", true, false},
		{"http://169.254.169.254/latest/meta-data/", false, false},
		{"http://[::ffff:169.254.169.254]/latest/meta-data/", false, false},
		{"http://[fd00:ec2::254]/latest/meta-data/", false, false},
		{"http://169.254.170.2/v2/credentials", false, false}, // the ECS task credentials endpoint
		{"http://169.254.169.254/latest/meta-data/", true, true},
		{"http://127.0.0.1:8088/", false, true},
	}
	for _, c := range cases {
		spec := fmt.Sprintf("name: s\nstart_urls: [%q]\nallow_private: %v\n", c.start, c.allowPrivate)
		s, err := spider.ParseSpec([]byte(spec), "s.yaml")
		if err == nil {
			_, err = spider.Compile(s)
		}
		if c.ok && err != nil {
			t.Errorf("%s (allow_private %v) rejected: %v", c.start, c.allowPrivate, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "start_urls")) {
			t.Errorf("%s (allow_private %v): err %v, want a rejection naming start_urls", c.start, c.allowPrivate, err)
		}
	}
}

// base_url, the argument every run of the demo spider takes, cannot point a run at a local file
// or the metadata service either.
func TestRunArgsRejectLocalFilesAndMetadata(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, Queues: []string{"control"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"file:///etc/passwd", "http://169.254.169.254/", "http://[::ffff:169.254.169.254]/"} {
		_, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
		if err == nil {
			t.Errorf("schedule with base_url %s accepted", base)
		}
	}
}

const ssrfSpec = `
name: ssrf
start_urls: [http://127.0.0.1/]
follow: [{css: a}]
`

// A page that links to file:// URLs and to the metadata services, and redirects there: the crawl
// makes no page job for any of them (file:// is never a request; the metadata hosts are outside
// the spider's domains, and a spec cannot list them without allow_private), so nothing is fetched.
func TestLinksToLocalFilesAndMetadataNeverFetched(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body>
<a href="file:///etc/passwd">passwd</a> <a href="file://localhost/etc/shadow">shadow</a>
<a href="http://169.254.169.254/latest/meta-data/iam/security-credentials/">creds</a>
<a href="http://[::ffff:169.254.169.254]/latest/meta-data/">mapped</a>
<a href="http://169.254.170.2/v2/credentials">ecs creds</a>
<a href="/to-metadata">redirect</a></body></html>`)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/user-data", http.StatusFound)
	})
	mux.HandleFunc("/robots.txt", http.NotFound)
	base := serve(t, mux)

	pool := dbtest.Pool(t)
	s, err := spider.ParseSpec([]byte(ssrfSpec), "ssrf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spider.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	reg := spider.NewRegistry()
	if err := reg.Register(sp); err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{Pool: pool, Spiders: reg, Worker: queue.WorkerConfig{Concurrency: 8},
		Fetch: fetch.Config{ConnectTimeout: 300 * time.Millisecond, ReadTimeout: time.Second, AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	sc, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "ssrf", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitFinished(t, n.Crawler, sc.RunID)
	var bad []string
	rows, err := pool.Query(ctx, `SELECT args->>'url' FROM crawlq_job WHERE kind = 'page' AND (args->>'url' ILIKE 'file:%' OR args->>'url' LIKE '%169.254.%')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u string
		rows.Scan(&u)
		bad = append(bad, u)
	}
	if rows.Err() != nil || len(bad) > 0 {
		t.Errorf("page jobs for local files or metadata: %v (%v)", bad, rows.Err())
	}
	if k := r.Stats.ErrorsByKind; k["connect"] != 0 || k["timeout"] != 0 {
		t.Errorf("errors by kind %v: a connection was attempted somewhere", k)
	}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// recorder is a loopback server that counts the requests reaching it: a stand-in for the Lambda
// runtime API on 127.0.0.1:9001, which a crawled page must not reach.
func recorder(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	base := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "8476a536-e9f4-11e8-9739-2dfe598c3fcd")
		fmt.Fprint(w, `{"secret":"the next invocation's event"}`)
	}))
	return base, &hits
}

// The fetcher's dial guard, the last line behind the spec and domain checks, through the
// package's public API: loopback (by address and by name) and metadata addresses, asked for
// directly, fail with ErrForbiddenAddress from the dialer's Control hook, which runs before
// connect(); the loopback server records no request. The controls reach the same loopback server
// with AllowLoopback (the metadata addresses staying refused) and with AllowPrivate. Only loopback
// is ever connected to: private and VPC addresses are checked at the Control hook in package
// fetch (TestDialerRefusesNonPublicBeforeConnect), where no dial can get past it.
func TestDialGuardRefusesBeforeConnect(t *testing.T) {
	t.Parallel()
	base, hits := recorder(t)
	redir := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	metadata := []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/", "http://169.254.170.2/v2/credentials",
		"http://[fe80::1]/"}
	loopback := []string{base + "/2018-06-01/runtime/invocation/next", strings.Replace(base, "127.0.0.1", "localhost", 1) + "/",
		"http://127.0.0.1:9001/2018-06-01/runtime/invocation/next"}
	if l, err := net.Listen("tcp", "[::1]:0"); err == nil {
		l.Close() // this machine has IPv6 loopback: ::1 is refused too (nothing listens there)
		loopback = append(loopback, "http://[::1]:9001/")
	}
	f, err := fetch.New(fetch.Config{ConnectTimeout: 300 * time.Millisecond, ReadTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, u := range append(append(metadata, loopback...), redir+"/") {
		_, err := f.Fetch(context.Background(), u)
		var re *fetch.RefusedError
		if !errors.Is(err, fetch.ErrForbiddenAddress) || !errors.As(err, &re) || fetch.Kind(err) != "forbidden" {
			t.Errorf("fetch %s: %v (kind %q), want a refusal (ErrForbiddenAddress)", u, err, fetch.Kind(err))
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests from the default fetcher", n)
	}

	lb, err := fetch.New(fetch.Config{AllowLoopback: true, ConnectTimeout: 300 * time.Millisecond, ReadTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if _, err := lb.Fetch(context.Background(), base+"/"); err != nil {
		t.Errorf("AllowLoopback: %v, want the loopback server reached", err)
	}
	for _, u := range append(metadata, redir+"/") {
		if _, err := lb.Fetch(context.Background(), u); !errors.Is(err, fetch.ErrForbiddenAddress) {
			t.Errorf("fetch %s with AllowLoopback: %v, want ErrForbiddenAddress", u, err)
		}
	}
	all, err := fetch.New(fetch.Config{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if _, err := all.Fetch(context.Background(), base+"/"); err != nil {
		t.Errorf("AllowPrivate: %v, want the loopback server reached", err)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the loopback server got %d requests, want 2 (one per allowing fetcher)", n)
	}

	for _, u := range []string{"file:///etc/passwd", "gopher://127.0.0.1/", "ftp://127.0.0.1/"} {
		if _, err := all.Fetch(context.Background(), u); !errors.Is(err, fetch.ErrScheme) {
			t.Errorf("fetch %s: %v, want ErrScheme even with AllowPrivate", u, err)
		}
	}
}

const runtimeSpec = `
name: %s
start_urls: [http://127.0.0.1/2018-06-01/runtime/invocation/next]
allow_private: %v
`

// A crawl whose page points at the worker's runtime API, as the page job a redirect to
// http://127.0.0.1:9001/... becomes (the crawler follows each redirect as a page job of its own,
// fetched like any other; package fetch tests the redirect itself): with the defaults, nothing
// reaches the stand-in server; the page fails as the page's own failure (kind forbidden, no host
// pause, so nothing waits), the run finishes, and the log says which address was refused and
// what would allow it. The control: the same crawl with allow_private: true in the spec reaches it.
func TestCrawlCannotReachRuntimeAPI(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	for _, allow := range []bool{false, true} {
		base, hits := recorder(t)
		name := fmt.Sprintf("runtime%v", allow)
		s, err := spider.ParseSpec([]byte(fmt.Sprintf(runtimeSpec, name, allow)), name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		sp, err := spider.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		reg := spider.NewRegistry()
		if err := reg.Register(sp); err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		n, err := node.New(node.Config{Pool: pool, Spiders: reg, Worker: queue.WorkerConfig{Concurrency: 4},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); n.Run(ctx) }()
		sc, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: name, Args: map[string]string{"base_url": base}})
		if err != nil {
			t.Fatal(err)
		}
		r := waitFinished(t, n.Crawler, sc.RunID)
		cancel()
		<-done
		k := r.Stats.ErrorsByKind
		if !allow {
			if h := hits.Load(); h != 0 {
				t.Errorf("the runtime API stand-in got %d requests", h)
			}
			if k["forbidden"] != 1 || r.Stats.Errors != 1 || r.Stats.HostPauses != 0 {
				t.Errorf("run %s, errors %d by kind %v; want 1 forbidden and no host pause", r.State, r.Stats.Errors, k)
			}
			want := "refused: 127.0.0.1 is a loopback address; set allow_private: true in the spider to crawl it"
			if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "page refused") {
				t.Errorf("the log does not say %q:\n%s", want, logs.String())
			}
			continue
		}
		if h := hits.Load(); h == 0 || k["forbidden"] != 0 || r.State != "succeeded" {
			t.Errorf("allow_private: true: %d requests reached the server, run %s, errors by kind %v; want it crawled", h, r.State, k)
		}
	}
}

func waitFinished(t *testing.T, c *crawl.Crawler, id int64) *crawl.Run {
	t.Helper()
	return testwait.For(t, fmt.Sprintf("run %d finished", id), func() (*crawl.Run, bool) {
		r, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r, r.Finished()
	})
}
