package spider_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"crawlq/internal/spider"
)

// memSource is a Source in memory; the Postgres one is tested in internal/spiderstore.
type memSource struct {
	mu    sync.Mutex
	specs map[string]spider.Stored
	fail  error
	calls int
}

func (m *memSource) Resolve(_ context.Context, name string) (spider.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.fail != nil {
		return spider.Stored{}, m.fail
	}
	st, ok := m.specs[name]
	if !ok {
		return spider.Stored{}, spider.ErrUnknownSpider
	}
	return st, nil
}

func (m *memSource) Names(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	var out []string
	for n := range m.specs {
		out = append(out, n)
	}
	return out, nil
}

func (m *memSource) set(f func(*memSource)) { m.mu.Lock(); f(m); m.mu.Unlock() }

func TestRegistrySource(t *testing.T) {
	t.Parallel()
	reg := spider.NewRegistry()
	local := "name: local\nstart_urls: [http://127.0.0.1:9/]\n"
	spec, err := spider.ParseSpec([]byte(local), "local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spider.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(sp); err != nil {
		t.Fatal(err)
	}
	src := &memSource{specs: map[string]spider.Stored{
		"local":  {Name: "local", Version: "3", Spec: []byte("name: local\nstart_urls: [http://127.0.0.1:10/]\nmax_pages: 7\n")},
		"cmd":    {Name: "cmd", Version: "1", Command: &spider.CommandSpec{Command: []string{"scrapy", "crawl", "x"}}, Settings: spider.DefaultSettings()},
		"broken": {Name: "broken", Version: "2", Spec: []byte("name: broken\n")},
	}}
	reg.SetSource(src, 50*time.Millisecond)

	got, err := reg.Lookup("local")
	if err != nil || got.Settings().MaxPages != 7 || reg.Version("local") != "3" {
		t.Fatalf("a stored version wins over the in-process spider: %v %+v", err, got)
	}
	if _, err := reg.Lookup("cmd"); !errors.Is(err, spider.ErrCommandSpider) {
		t.Fatalf("stored command spider: %v", err)
	}
	if c, _, ok := reg.Command("cmd"); !ok || c.Command[1] != "crawl" {
		t.Fatalf("Command: %v %v", c, ok)
	}
	if _, err := reg.Lookup("broken"); !errors.Is(err, spider.ErrUnknownSpider) {
		t.Fatalf("a stored spec that no longer validates: %v, want ErrUnknownSpider", err)
	}
	if _, err := reg.Lookup("nope"); !errors.Is(err, spider.ErrUnknownSpider) {
		t.Fatalf("unknown: %v", err)
	}
	// Cached within the TTL: one source call for many lookups.
	src.set(func(m *memSource) { m.calls = 0 })
	for range 100 {
		if _, err := reg.Lookup("local"); err != nil {
			t.Fatal(err)
		}
	}
	if src.calls > 1 {
		t.Fatalf("%d source calls for 100 lookups within the TTL", src.calls)
	}
	// A new version is seen after the TTL.
	src.set(func(m *memSource) {
		m.specs["local"] = spider.Stored{Name: "local", Version: "4", Spec: []byte("name: local\nstart_urls: [http://127.0.0.1:10/]\nmax_pages: 9\n")}
	})
	for deadline := time.Now().Add(5 * time.Second); reg.Version("local") != "4"; time.Sleep(10 * time.Millisecond) { // paces a poll
		if time.Now().After(deadline) {
			t.Fatal("version 4 never seen")
		}
	}
	if got, err := reg.Lookup("local"); err != nil || got.Settings().MaxPages != 9 {
		t.Fatalf("version 4 not compiled: %v", err)
	}
	// The source fails: the last answer stands; a name never resolved is an error, not "unknown".
	down := errors.New("connection refused")
	src.set(func(m *memSource) { m.fail = down; m.calls = 0 })
	// Look up until the cached answer has aged past the TTL and the registry asked the failing
	// source (calls > 0); every answer, before and after, must be version 4.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) { // paces a poll
		got, err := reg.Lookup("local")
		if err != nil || got.Settings().MaxPages != 9 {
			t.Fatalf("stale answer while the source is down: %v", err)
		}
		src.mu.Lock()
		asked := src.calls > 0
		src.mu.Unlock()
		if asked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the registry never asked the source again after its TTL")
		}
	}
	if _, err := reg.Lookup("other"); err == nil || errors.Is(err, spider.ErrUnknownSpider) || !errors.Is(err, down) {
		t.Fatalf("a name never resolved while the source is down: %v", err)
	}
	if names := reg.Names(); len(names) != 1 || names[0] != "local" {
		t.Fatalf("names while the source is down: %v (the in-process ones)", names)
	}
}
