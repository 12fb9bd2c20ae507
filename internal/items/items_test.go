package items

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// page returns the n items a spider would extract from page p of writer w in run.
func page(run int64, w, p, n int) []Item {
	items := make([]Item, n)
	for i := range items {
		key := fmt.Sprintf("w%02d-p%03d-i%02d", w, p, i)
		items[i] = Item{
			RunID: run, Spider: "books", Key: key,
			URL:  fmt.Sprintf("http://127.0.0.1/w%d/p%d", w, p),
			Data: json.RawMessage(fmt.Sprintf(`{"title":%q,"price":%d}`, key, i)),
		}
	}
	return items
}

func newPipeline(t testing.TB, sink Sink, cfg Config) *Pipeline {
	t.Helper()
	p, err := New(sink, cfg, testLog(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// testLog sends the pipeline's logs to the test's output, shown only for failures and -v.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// runKeys returns every key of run in the table, failing on duplicates or a wrong count.
func runKeys(t testing.TB, pool *pgxpool.Pool, run int64) map[string]bool {
	t.Helper()
	ctx := context.Background()
	n, err := CountItems(ctx, pool, run)
	if err != nil {
		t.Fatal(err)
	}
	items, err := ListItems(ctx, pool, run, MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(items)) != n {
		t.Fatalf("ListItems returned %d items, CountItems %d", len(items), n)
	}
	keys := map[string]bool{}
	for _, it := range items {
		if keys[it.Key] {
			t.Fatalf("key %s stored twice", it.Key)
		}
		keys[it.Key] = true
	}
	return keys
}

func assertKeys(t testing.TB, got map[string]bool, want [][]Item) {
	t.Helper()
	n := 0
	for _, pg := range want {
		for _, it := range pg {
			n++
			if !got[it.Key] {
				t.Errorf("item %s missing from the sink", it.Key)
			}
		}
	}
	if len(got) != n {
		t.Errorf("sink holds %d items, want %d", len(got), n)
	}
}

// testSink wraps a real sink to make it slow and unreliable on demand.
type testSink struct {
	inner Sink
	// gate, when set, holds every Write until it is closed (or ctx ends).
	gate chan struct{}
	// failEvery > 0 makes every failEvery-th call fail before writing, and the call
	// after it fail after writing (a lost reply), so retries re-send stored items.
	failEvery int
	// failAll makes every call fail.
	failAll atomic.Bool

	calls    atomic.Int64
	inFlight atomic.Int64
	maxBatch atomic.Int64
}

var errInjected = errors.New("injected sink failure")

func (s *testSink) Name() string { return "test(" + s.inner.Name() + ")" }

func (s *testSink) Write(ctx context.Context, batch []Item) error {
	n := s.calls.Add(1)
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		if m := s.maxBatch.Load(); int64(len(batch)) <= m || s.maxBatch.CompareAndSwap(m, int64(len(batch))) {
			break
		}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.failAll.Load() {
		return errInjected
	}
	if s.failEvery > 0 && n%int64(s.failEvery) == 0 {
		return errInjected
	}
	if err := s.inner.Write(ctx, batch); err != nil {
		return err
	}
	if s.failEvery > 0 && n%int64(s.failEvery) == 1 && n > 1 {
		return fmt.Errorf("after writing: %w", errInjected)
	}
	return nil
}

func TestItemValidate(t *testing.T) {
	ok := Item{RunID: 1, Spider: "s", Key: "k", URL: "http://x/", Data: json.RawMessage(` {"a":"\\u0000 is fine escaped"}`)}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid item rejected: %v", err)
	}
	for name, mut := range map[string]func(*Item){
		"zero run":         func(it *Item) { it.RunID = 0 },
		"empty key":        func(it *Item) { it.Key = "" },
		"long key":         func(it *Item) { it.Key = strings.Repeat("k", MaxKeyLen+1) },
		"nul in key":       func(it *Item) { it.Key = "a\x00b" },
		"bad utf8 url":     func(it *Item) { it.URL = "http://x/\xff" },
		"nil data":         func(it *Item) { it.Data = nil },
		"array data":       func(it *Item) { it.Data = json.RawMessage(`[1]`) },
		"broken json":      func(it *Item) { it.Data = json.RawMessage(`{"a":`) },
		"trailing garbage": func(it *Item) { it.Data = json.RawMessage(`{"a":1} x`) },
		"nul escape":       func(it *Item) { it.Data = json.RawMessage(`{"a":"x\u0000y"}`) },
		"nul escape key":   func(it *Item) { it.Data = json.RawMessage(`{"\u0000":1}`) },
		"bad utf8 data":    func(it *Item) { it.Data = json.RawMessage("{\"a\":\"\xff\"}") },
	} {
		it := ok
		mut(&it)
		if err := it.Validate(); !errors.Is(err, ErrInvalidItem) {
			t.Errorf("%s: Validate = %v, want ErrInvalidItem", name, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for field, cfg := range map[string]Config{
		"MaxItems":      {MaxItems: -1},
		"MaxBytes":      {MaxBytes: -5},
		"BatchSize":     {MaxItems: 10, BatchSize: 11},
		"FlushInterval": {FlushInterval: -time.Second},
		"SubmitTimeout": {SubmitTimeout: -time.Second},
		"Concurrency":   {Concurrency: -2},
		"RetryBackoff":  {RetryBackoff: -time.Second},
		"WriteTimeout":  {WriteTimeout: -time.Second},
	} {
		_, err := New(&testSink{}, cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "Config."+field) {
			t.Errorf("New with bad %s: err = %v, want one naming the field", field, err)
		}
	}
	// A small buffer with the default batch size must work, not fail validation.
	c := Config{MaxItems: 10}.withDefaults()
	if err := c.validate(); err != nil || c.BatchSize != 10 {
		t.Errorf("Config{MaxItems: 10} defaults to BatchSize %d, err %v", c.BatchSize, err)
	}
	if _, err := New(nil, Config{}, nil); err == nil {
		t.Error("New(nil sink) succeeded")
	}
}

func TestWriteRejectsInvalidItemsWholesale(t *testing.T) {
	sink := &testSink{inner: nopSink{}}
	p := newPipeline(t, sink, Config{})
	items := page(1, 0, 0, 3)
	items[2].Data = json.RawMessage(`"not an object"`)
	if err := p.Write(context.Background(), items); !errors.Is(err, ErrInvalidItem) || !strings.Contains(err.Error(), "item 2") {
		t.Fatalf("Write = %v, want ErrInvalidItem naming item 2", err)
	}
	if s := p.Stats(); s.BufferedItems != 0 || s.MaxBufferedItems != 0 || sink.calls.Load() != 0 {
		t.Fatalf("an invalid call was partly accepted: %+v, %d sink calls", s, sink.calls.Load())
	}
	if err := p.Write(context.Background(), nil); err != nil {
		t.Fatalf("empty Write = %v", err)
	}
}

type nopSink struct{}

func (nopSink) Name() string                        { return "nop" }
func (nopSink) Write(context.Context, []Item) error { return nil }

// writeAll writes pages from concurrent writers, retrying a page on ErrBackpressure as
// a page job would, and returns how many ErrBackpressure each got.
func writeAll(t *testing.T, p *Pipeline, pages [][][]Item) int64 {
	t.Helper()
	var bp atomic.Int64
	var wg sync.WaitGroup
	for w, mine := range pages {
		wg.Go(func() {
			for _, pg := range mine {
				for {
					start := time.Now()
					err := p.Write(context.Background(), pg)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrBackpressure) {
						t.Errorf("writer %d: %v", w, err)
						return
					}
					if waited := time.Since(start); waited < p.cfg.SubmitTimeout {
						t.Errorf("ErrBackpressure after %s, before SubmitTimeout %s", waited, p.cfg.SubmitTimeout)
					}
					bp.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return bp.Load()
}

func makePages(run int64, writers, pagesEach, itemsEach int) [][][]Item {
	out := make([][][]Item, writers)
	for w := range out {
		for pg := range pagesEach {
			out[w] = append(out[w], page(run, w, pg, itemsEach))
		}
	}
	return out
}

func flatten(pages [][][]Item) [][]Item {
	var out [][]Item
	for _, w := range pages {
		out = append(out, w...)
	}
	return out
}
