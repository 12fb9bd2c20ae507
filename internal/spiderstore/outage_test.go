package spiderstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbtest"
	"crawlq/internal/logtest"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
)

// flakyDB stands between a pool and Postgres: up, it forwards connections; down, nothing listens
// on its port (a connection is refused) and the connections it forwarded are cut.
type flakyDB struct {
	t      *testing.T
	addr   string // where it listens
	target string // Postgres
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newFlakyDB(t *testing.T, target string) *flakyDB {
	t.Helper()
	f := &flakyDB{t: t, addr: "127.0.0.1:0", target: target}
	f.up()
	t.Cleanup(f.down)
	return f
}

func (f *flakyDB) up() {
	f.t.Helper()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.ln, f.addr = ln, ln.Addr().String()
	f.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by down
			}
			d, err := net.Dial("tcp", f.target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, d)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(d, c); d.Close() }() // either side's end ends both
			go func() { _, _ = io.Copy(c, d); c.Close() }()
		}
	}()
}

func (f *flakyDB) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// While the spider store's database is unreachable, a registry answers from what it resolved
// before and from its in-process spiders, and says so once per outage, with the error: listing
// names leaves the stored spiders out, but not silently.
func TestRegistryWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.Schema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := newFlakyDB(t, u.Host)
	u.Host = db.addr
	q := u.Query()
	q.Set("connect_timeout", "5")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := spiderstore.New(spiderstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Push(ctx, spiderstore.File{Name: "pushed.yaml", Data: []byte("name: pushed\nstart_urls: [http://127.0.0.1:9/]\n")}, ""); err != nil {
		t.Fatal(err)
	}
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"local.yaml": {Data: []byte("name: local\nstart_urls: [http://127.0.0.1:9/]\n")}}); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Records{}
	// A TTL of 1ns: every call below asks the store.
	reg.SetSource(spider.SourceConfig{Source: store, TTL: time.Nanosecond, Logger: slog.New(logs)})
	if res, err := reg.Resolve("pushed", "1"); err != nil || res.Version != "1" {
		t.Fatalf("pushed@1 while the store is up: %+v %v", res, err)
	}
	if _, err := reg.Lookup("pushed"); err != nil {
		t.Fatal(err)
	}
	if names := reg.Names(); !slices.Equal(names, []string{"local", "pushed"}) {
		t.Fatalf("names while the store is up: %v", names)
	}

	for outage := 1; outage <= 2; outage++ {
		db.down()
		for range 3 {
			if _, err := reg.Lookup("pushed"); err != nil {
				t.Fatalf("outage %d: pushed, resolved before: %v", outage, err)
			}
			if res, err := reg.Resolve("pushed", "1"); err != nil || res.Version != "1" {
				t.Fatalf("outage %d: pushed@1, resolved before: %+v %v", outage, res, err)
			}
			if _, err := reg.Lookup("local"); err != nil {
				t.Fatalf("outage %d: the in-process spider: %v", outage, err)
			}
			if _, err := reg.Lookup("other"); err == nil || errors.Is(err, spider.ErrUnknownSpider) {
				t.Fatalf("outage %d: a name never resolved: %v, want the store's error, not unknown", outage, err)
			}
			if names := reg.Names(); !slices.Equal(names, []string{"local"}) {
				t.Fatalf("outage %d: names %v, want the in-process ones", outage, names)
			}
		}
		warns := logs.At(slog.LevelWarn)
		if len(warns) != outage {
			t.Fatalf("outage %d: %d warnings, want one per outage: %q", outage, len(warns), warns)
		}
		if w := warns[outage-1]; !strings.Contains(w, "spider store unreachable: answering from cached and in-process spiders") || !strings.Contains(w, "err=") {
			t.Fatalf("outage %d: warning %q does not say what the registry does, or the error", outage, w)
		}
		db.up()
		if names := reg.Names(); !slices.Equal(names, []string{"local", "pushed"}) {
			t.Fatalf("after outage %d: names %v", outage, names)
		}
		if infos := logs.At(slog.LevelInfo); len(infos) != outage || !strings.Contains(infos[outage-1], "spider store answers again") {
			t.Fatalf("after outage %d: info lines %q", outage, infos)
		}
	}
	t.Logf("the warning: %s", logs.At(slog.LevelWarn)[0])
}

// A store whose database was never reachable (a pool on a closed port): the registry answers with
// its in-process spiders, and the one warning names the refused connection.
func TestRegistryWithAStoreNeverReachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	pool, err := pgxpool.New(context.Background(), "postgres://crawlq@"+closed+"/crawlq?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := spiderstore.New(spiderstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"local.yaml": {Data: []byte("name: local\nstart_urls: [http://127.0.0.1:9/]\n")}}); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Records{}
	reg.SetSource(spider.SourceConfig{Source: store, Logger: slog.New(logs)})
	for range 3 {
		if res, err := reg.Resolve("local", ""); err != nil || res.Spider == nil {
			t.Fatalf("the in-process spider: %+v %v", res, err)
		}
		if _, err := reg.Resolve("local", "1"); err == nil || errors.Is(err, spider.ErrUnknownVersion) {
			t.Fatalf("a version, which only the store knows: %v, want the store's error", err)
		}
		if names := reg.Names(); !slices.Equal(names, []string{"local"}) {
			t.Fatalf("names %v", names)
		}
	}
	if warns := logs.At(slog.LevelWarn); len(warns) != 1 || !strings.Contains(warns[0], "connection refused") {
		t.Fatalf("warnings %q, want one naming the refused connection", warns)
	}
}
