package security

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
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
		Fetch: fetch.Config{ConnectTimeout: 300 * time.Millisecond, ReadTimeout: time.Second}})
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
	deadline := time.Now().Add(time.Minute)
	var r *crawl.Run
	for {
		if r, err = n.Crawler.Get(ctx, sc.RunID); err != nil {
			t.Fatal(err)
		}
		if r.Finished() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not finished in 1m: %+v", r)
		}
		time.Sleep(20 * time.Millisecond) // paces a poll
	}
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

// The fetcher's dial guard, the last line behind the spec and domain checks: a metadata address,
// asked for directly or reached through a redirect from an allowed site, fails with
// ErrForbiddenAddress from the dialer's Control hook, which runs before connect(); so no packet
// leaves. The control case shows the difference: with AllowPrivate the same fetch does attempt the
// connection (and fails here with a connect error or timeout, since nothing answers there).
func TestDialGuardRefusesMetadataBeforeConnect(t *testing.T) {
	t.Parallel()
	redir := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	targets := []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/", "http://169.254.170.2/v2/credentials",
		"http://[fe80::1]/", redir + "/"}
	for _, allow := range []bool{false, true} {
		f, err := fetch.New(fetch.Config{AllowPrivate: allow, ConnectTimeout: 300 * time.Millisecond, ReadTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range targets {
			_, err := f.Fetch(context.Background(), u)
			forbidden := errors.Is(err, fetch.ErrForbiddenAddress)
			if !allow && !forbidden {
				t.Errorf("fetch %s: %v (kind %q), want ErrForbiddenAddress", u, err, fetch.Kind(err))
			}
			if allow && (forbidden || err == nil) {
				t.Errorf("fetch %s with AllowPrivate: %v, want an attempted connection that fails", u, err)
			}
		}
		f.Close()
	}
	for _, u := range []string{"file:///etc/passwd", "gopher://127.0.0.1/", "ftp://127.0.0.1/"} {
		f, err := fetch.New(fetch.Config{AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Fetch(context.Background(), u); !errors.Is(err, fetch.ErrScheme) {
			t.Errorf("fetch %s: %v, want ErrScheme even with AllowPrivate", u, err)
		}
		f.Close()
	}
}
