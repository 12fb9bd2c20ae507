package spider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/logtest"
	"crawlq/internal/spider"
)

// discard is a logger for tests that do not look at the log.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// memSource is a Source in memory; the Postgres one is tested in internal/spiderstore.
type memSource struct {
	mu    sync.Mutex
	specs map[string][]spider.Stored // each name's versions, oldest first
	fail  error
	calls int
}

func (m *memSource) Resolve(_ context.Context, name, version string) (spider.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.fail != nil {
		return spider.Stored{}, m.fail
	}
	vs, ok := m.specs[name]
	if !ok {
		return spider.Stored{}, fmt.Errorf("spider %q: %w", name, spider.ErrUnknownSpider)
	}
	if version == "" {
		return vs[len(vs)-1], nil
	}
	for _, st := range vs {
		if st.Version == version {
			return st, nil
		}
	}
	return spider.Stored{}, fmt.Errorf("%w %q of spider %q", spider.ErrUnknownVersion, version, name)
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
	src := &memSource{specs: map[string][]spider.Stored{
		"local":  {{Name: "local", Version: "3", Spec: []byte("name: local\nstart_urls: [http://127.0.0.1:10/]\nmax_pages: 7\n")}},
		"cmd":    {{Name: "cmd", Version: "1", Command: &spider.CommandSpec{Command: []string{"scrapy", "crawl", "x"}}, Settings: spider.DefaultSettings()}},
		"broken": {{Name: "broken", Version: "2", Spec: []byte("name: broken\n")}},
	}}
	clk := clock.NewStopped(time.Now())
	reg.SetSource(spider.SourceConfig{Source: src, TTL: 50 * time.Millisecond, Clock: clk, Logger: discard})

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
	if _, err := reg.Lookup("broken"); !errors.Is(err, spider.ErrUnknownSpider) || !errors.Is(err, spider.ErrUnusableSpider) {
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
		m.specs["local"] = append(m.specs["local"], spider.Stored{Name: "local", Version: "4", Spec: []byte("name: local\nstart_urls: [http://127.0.0.1:10/]\nmax_pages: 9\n")})
	})
	if v := reg.Version("local"); v != "3" {
		t.Fatalf("version %s within the TTL; want the cached 3", v)
	}
	clk.Advance(50 * time.Millisecond)
	if v := reg.Version("local"); v != "4" {
		t.Fatalf("version %s once the TTL is over; want 4", v)
	}
	if got, err := reg.Lookup("local"); err != nil || got.Settings().MaxPages != 9 {
		t.Fatalf("version 4 not compiled: %v", err)
	}
	// The source fails: the last answer stands; a name never resolved is an error, not "unknown".
	down := errors.New("connection refused")
	src.set(func(m *memSource) { m.fail = down; m.calls = 0 })
	// Within the TTL the cached answer stands without asking; past it, the registry asks the
	// failing source and keeps its last answer: version 4 either way.
	for _, step := range []time.Duration{0, 50 * time.Millisecond} {
		clk.Advance(step)
		got, err := reg.Lookup("local")
		if err != nil || got.Settings().MaxPages != 9 {
			t.Fatalf("stale answer while the source is down: %v", err)
		}
		src.mu.Lock()
		asked := src.calls > 0
		src.mu.Unlock()
		if asked != (step > 0) {
			t.Fatalf("%s after the last answer: source asked %v; want %v", step, asked, step > 0)
		}
	}
	if _, err := reg.Lookup("other"); err == nil || errors.Is(err, spider.ErrUnknownSpider) || !errors.Is(err, down) {
		t.Fatalf("a name never resolved while the source is down: %v", err)
	}
	if names := reg.Names(); len(names) != 1 || names[0] != "local" {
		t.Fatalf("names while the source is down: %v (the in-process ones)", names)
	}
}

// A stored version is resolved by name and version, whatever is newest; versions of equal content
// share one compiled spider; each version brings its own monitors; a version the source lacks is
// an error naming it.
func TestRegistryResolvesAVersion(t *testing.T) {
	t.Parallel()
	v1 := "name: shop\nstart_urls: [http://127.0.0.1:9/]\nmax_pages: 1\nmonitors: {min_items: 1}\n"
	v2 := "name: shop\nstart_urls: [http://127.0.0.1:9/]\nmax_pages: 2\nmonitors: {min_items: 2}\n"
	src := &memSource{specs: map[string][]spider.Stored{"shop": {
		{Name: "shop", Version: "1", Spec: []byte(v1)},
		{Name: "shop", Version: "2", Spec: []byte(v2)},
		{Name: "shop", Version: "3", Spec: []byte(v1)}, // v1 pushed again
	}}}
	reg := spider.NewRegistry()
	reg.SetSource(spider.SourceConfig{Source: src, Logger: discard})

	for version, pages := range map[string]int{"1": 1, "2": 2, "3": 1, "": 1} {
		res, err := reg.Resolve("shop", version)
		if err != nil {
			t.Fatalf("version %q: %v", version, err)
		}
		want := version
		if version == "" {
			want = "3"
		}
		if res.Version != want || res.Spider == nil || res.Spider.Settings().MaxPages != pages || *res.Monitors.MinItems != int64(pages) {
			t.Fatalf("version %q: got version %q, max_pages %d, monitors %+v", version, res.Version, res.Spider.Settings().MaxPages, res.Monitors)
		}
	}
	one, err := reg.Resolve("shop", "1")
	if err != nil {
		t.Fatal(err)
	}
	three, err := reg.Resolve("shop", "3")
	if err != nil {
		t.Fatal(err)
	}
	if one.Spider != three.Spider {
		t.Fatal("versions 1 and 3 have equal content but were compiled twice")
	}
	if m, err := reg.Monitors("shop", "2"); err != nil || *m.MinItems != 2 {
		t.Fatalf("monitors of version 2: %+v %v", m, err)
	}
	_, err = reg.Resolve("shop", "7")
	if !errors.Is(err, spider.ErrUnknownVersion) || !strings.Contains(err.Error(), `"7"`) {
		t.Fatalf("version 7: %v, want ErrUnknownVersion naming it", err)
	}
	if _, err := reg.Monitors("shop", "7"); !errors.Is(err, spider.ErrUnknownVersion) {
		t.Fatalf("monitors of version 7: %v", err)
	}
	if _, err := reg.Resolve("nope", "1"); !errors.Is(err, spider.ErrUnknownSpider) {
		t.Fatalf("a version of an unknown spider: %v", err)
	}
	// Without a source, only in-process spiders exist, and they have no versions.
	local := spider.NewRegistry()
	sp, err := spider.Compile(mustSpec(t, v1))
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Register(sp); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Resolve("shop", "1"); !errors.Is(err, spider.ErrUnknownVersion) || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("a version without a store: %v", err)
	}
	if res, err := local.Resolve("shop", ""); err != nil || res.Version != "" || res.Spider != sp {
		t.Fatalf("the in-process spider: %+v %v", res, err)
	}
}

func mustSpec(t *testing.T, yaml string) *spider.Spec {
	t.Helper()
	spec, err := spider.ParseSpec([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// A failing source is logged once per outage, not per call, with its error; its end too.
func TestRegistrySourceOutageLoggedOnce(t *testing.T) {
	t.Parallel()
	logs := &logtest.Records{}
	src := &memSource{specs: map[string][]spider.Stored{"shop": {{Name: "shop", Version: "1", Spec: []byte("name: shop\nstart_urls: [http://127.0.0.1:9/]\n")}}}}
	reg := spider.NewRegistry()
	reg.SetSource(spider.SourceConfig{Source: src, TTL: time.Nanosecond, Logger: slog.New(logs)})
	if _, err := reg.Lookup("shop"); err != nil {
		t.Fatal(err)
	}
	down := errors.New("connection refused")
	for outage := 1; outage <= 2; outage++ {
		src.set(func(m *memSource) { m.fail = down })
		for range 5 {
			if _, err := reg.Lookup("shop"); err != nil {
				t.Fatalf("the cached shop while the source is down: %v", err)
			}
			if _, err := reg.Lookup("other"); !errors.Is(err, down) {
				t.Fatalf("a name never resolved while the source is down: %v", err)
			}
			if names := reg.Names(); len(names) != 0 {
				t.Fatalf("names while the source is down: %v", names)
			}
		}
		warns := logs.At(slog.LevelWarn)
		if len(warns) != outage || !strings.Contains(warns[outage-1], "spider store unreachable") || !strings.Contains(warns[outage-1], "connection refused") {
			t.Fatalf("outage %d: warnings %q, want one per outage naming the error", outage, warns)
		}
		src.set(func(m *memSource) { m.fail = nil })
		if names := reg.Names(); len(names) != 1 {
			t.Fatalf("names once the source answers: %v", names)
		}
		if infos := logs.At(slog.LevelInfo); len(infos) != outage || !strings.Contains(infos[outage-1], "answers again") {
			t.Fatalf("outage %d: info lines %q, want one saying the store is back", outage, infos)
		}
	}
}
