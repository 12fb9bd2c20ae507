package items

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/testwait"
)

func TestConcurrentWritersExactlyOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	sink := &testSink{inner: NewPostgresSink(pool)}
	p := newPipeline(t, sink, Config{BatchSize: 64, FlushInterval: 2 * time.Millisecond})
	pages := makePages(1, 16, 20, 10)

	if bp := writeAll(t, p, pages); bp != 0 {
		t.Errorf("%d ErrBackpressure with a roomy buffer", bp)
	}
	assertKeys(t, runKeys(t, pool, 1), flatten(pages))

	// Every page retried (as after a crash before completion): still one row per key.
	writeAll(t, p, pages)
	assertKeys(t, runKeys(t, pool, 1), flatten(pages))

	s := p.Stats()
	if s.WrittenItems != 2*16*20*10 || s.BufferedItems != 0 || s.BufferedBytes != 0 {
		t.Errorf("stats after two passes: %+v", s)
	}
	if s.Batches >= 2*16*20 {
		t.Errorf("%d batches for %d Write calls: no group commit", s.Batches, 2*16*20)
	}
	if m := sink.maxBatch.Load(); m > 64 {
		t.Errorf("a sink write held %d items, BatchSize is 64", m)
	}
}

// TestSlowSink stalls a real Postgres sink, then lets it through with intermittent
// failures (some after the rows were stored), once with the item limit binding and once
// with the byte limit binding.
func TestSlowSink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"items bound", Config{MaxItems: 100, MaxBytes: 1 << 20, BatchSize: 20}},
		{"bytes bound", Config{MaxItems: 10000, MaxBytes: 6000, BatchSize: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			sink := &testSink{inner: NewPostgresSink(pool), gate: make(chan struct{}), failEvery: 3}
			cfg := tc.cfg
			cfg.FlushInterval = 5 * time.Millisecond
			cfg.SubmitTimeout = 100 * time.Millisecond
			cfg.RetryBackoff = 5 * time.Millisecond
			cfg.Concurrency = 2
			p := newPipeline(t, sink, cfg)
			pages := makePages(3, 16, 5, 10) // 16 writers of 10-item pages: 160 items in flight

			var bp int64
			done := make(chan struct{})
			go func() { defer close(done); bp = writeAll(t, p, pages) }()

			// While the sink is stalled the buffer fills and writers are pushed back.
			testwait.Until(t, "writers to get ErrBackpressure", func() bool { return p.Stats().Backpressure >= 16 })
			s := p.Stats()
			if s.BufferedItems == 0 || s.BufferedItems > cfg.MaxItems || s.BufferedBytes > cfg.MaxBytes {
				t.Errorf("stalled: buffered %d items / %d bytes, limits %d / %d", s.BufferedItems, s.BufferedBytes, cfg.MaxItems, cfg.MaxBytes)
			}
			if s.WrittenItems != 0 {
				t.Errorf("stalled sink wrote %d items", s.WrittenItems)
			}
			if n := sink.inFlight.Load(); n > int64(cfg.Concurrency) {
				t.Errorf("%d sink writes in flight, Concurrency %d", n, cfg.Concurrency)
			}

			close(sink.gate) // the sink recovers, but fails every third call
			<-done
			assertKeys(t, runKeys(t, pool, 3), flatten(pages))

			s = p.Stats()
			if s.MaxBufferedItems > cfg.MaxItems || s.MaxBufferedBytes > cfg.MaxBytes {
				t.Errorf("buffer peaked at %d items / %d bytes, limits %d / %d", s.MaxBufferedItems, s.MaxBufferedBytes, cfg.MaxItems, cfg.MaxBytes)
			}
			if s.Backpressure != bp || bp == 0 {
				t.Errorf("Stats.Backpressure %d, writers saw %d", s.Backpressure, bp)
			}
			if s.Retries == 0 {
				t.Error("no sink write was retried")
			}
			if s.BufferedItems != 0 || s.BufferedBytes != 0 {
				t.Errorf("buffer not empty after all writes returned: %+v", s)
			}
			t.Logf("%+v", s)
		})
	}
}

// A write larger than the whole buffer goes through in pieces, and an item larger than
// MaxBytes goes through alone.
func TestOversizedWrites(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	cfg := Config{MaxItems: 8, MaxBytes: 2000, BatchSize: 4, FlushInterval: time.Millisecond, SubmitTimeout: 5 * time.Second}
	p := newPipeline(t, NewPostgresSink(pool), cfg)
	ctx := context.Background()

	big := page(4, 0, 0, 100)
	if err := p.Write(ctx, big); err != nil {
		t.Fatalf("Write of 100 items through an 8-item buffer: %v", err)
	}
	huge := page(4, 1, 0, 1)
	huge[0].Data = json.RawMessage(`{"blob":"` + strings.Repeat("x", 5000) + `"}`)
	var wg sync.WaitGroup
	for w := 2; w < 6; w++ { // concurrent small writers compete with the huge item
		wg.Go(func() {
			if err := p.Write(ctx, page(4, w, 0, 3)); err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		})
	}
	if err := p.Write(ctx, huge); err != nil {
		t.Fatalf("Write of one item larger than MaxBytes: %v", err)
	}
	wg.Wait()
	want := [][]Item{big, huge}
	for w := 2; w < 6; w++ {
		want = append(want, page(4, w, 0, 3))
	}
	assertKeys(t, runKeys(t, pool, 4), want)
	s := p.Stats()
	if s.MaxBufferedItems > cfg.MaxItems {
		t.Errorf("buffer peaked at %d items, limit %d", s.MaxBufferedItems, cfg.MaxItems)
	}
	if s.MaxBufferedBytes > max(cfg.MaxBytes, huge[0].size()) {
		t.Errorf("buffer peaked at %d bytes; limit %d, largest item %d", s.MaxBufferedBytes, cfg.MaxBytes, huge[0].size())
	}
}

// A writer whose context ends while the sink keeps failing gets its context's error
// wrapping the sink's, and its items leave the buffer.
func TestWriterGivesUp(t *testing.T) {
	t.Parallel()
	sink := &testSink{inner: nopSink{}}
	sink.failAll.Store(true)
	p := newPipeline(t, sink, Config{FlushInterval: time.Millisecond, RetryBackoff: time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := p.Write(ctx, page(5, 0, 0, 10))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errInjected) {
		t.Fatalf("Write = %v, want DeadlineExceeded wrapping the sink error", err)
	}
	testwait.Until(t, "the failed batch to be dropped", func() bool { return p.Stats().BufferedItems == 0 })
	if s := p.Stats(); s.Dropped != 10 || s.Retries == 0 {
		t.Errorf("stats: %+v, want 10 dropped and some retries", s)
	}
	// The sink recovers: the pipeline is still usable.
	sink.failAll.Store(false)
	if err := p.Write(context.Background(), page(5, 0, 1, 10)); err != nil {
		t.Fatalf("Write after recovery: %v", err)
	}
	// A context already ended sends nothing.
	if err := p.Write(ctx, page(5, 0, 2, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write with ended ctx = %v", err)
	}
}

// Close waits for admitted items, refuses new ones, and is idempotent.
func TestCloseDrains(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	sink := &testSink{inner: NewPostgresSink(pool), gate: make(chan struct{})}
	p, err := New(sink, Config{FlushInterval: time.Hour}, testLog(t)) // only Close flushes partial batches
	if err != nil {
		t.Fatal(err)
	}
	pages := makePages(6, 6, 1, 7)
	done := make(chan struct{})
	go func() { defer close(done); writeAll(t, p, pages) }()
	testwait.Until(t, "every item to be admitted", func() bool { return p.Stats().BufferedItems == 42 })
	if n := sink.calls.Load(); n != 0 {
		t.Fatalf("%d sink writes before a batch was full or FlushInterval passed", n)
	}

	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	testwait.Until(t, "Close to flush the partial batch", func() bool { return sink.inFlight.Load() > 0 })
	testwait.Until(t, "Close to refuse new writes", func() bool {
		return errors.Is(p.Write(context.Background(), page(6, 99, 0, 1)), ErrClosed)
	})
	close(sink.gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-done
	assertKeys(t, runKeys(t, pool, 6), flatten(pages))
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Close gives up when its context ends with the sink hung: writers get ErrClosed.
func TestCloseGivesUp(t *testing.T) {
	t.Parallel()
	sink := &testSink{inner: nopSink{}, gate: make(chan struct{})}
	p, err := New(sink, Config{FlushInterval: time.Millisecond, MaxItems: 10, BatchSize: 5}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for w := range 4 {
		go func() { errs <- p.Write(context.Background(), page(7, w, 0, 5)) }()
	}
	testwait.Until(t, "the buffer to fill", func() bool { return p.Stats().BufferedItems == 10 && sink.inFlight.Load() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	for range 4 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("writer got %v, want ErrClosed", err)
		}
	}
	if s := p.Stats(); s.BufferedItems != 0 {
		t.Errorf("buffer after Close gave up: %+v", s)
	}
}

// BenchmarkPipeline measures throughput into Postgres with many concurrent page jobs
// writing 10 items each: once with the defaults, where a 50ms FlushInterval bounds how
// often partial batches go out, and once with a short FlushInterval.
func BenchmarkPipeline(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"defaults", Config{}}, {"flush=2ms", Config{FlushInterval: 2 * time.Millisecond}}} {
		b.Run(bc.name, func(b *testing.B) {
			pool := dbtest.Pool(b)
			p := newPipeline(b, NewPostgresSink(pool), bc.cfg)
			var mu sync.Mutex
			next := 0
			b.SetParallelism(16) // many page jobs per core, as in a worker
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu.Lock()
					n := next
					next++
					mu.Unlock()
					if err := p.Write(context.Background(), page(1, n%1000, n/1000, 10)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "items/s")
			s := p.Stats()
			b.ReportMetric(float64(s.WrittenItems)/float64(max(s.Batches, 1)), "items/batch")
		})
	}
}

// An item only the database refuses (a number too large for jsonb) fails its own
// writer, not the other writers whose items shared its batch.
func TestSinkRejectsOneItem(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	// One batch of exactly all 6x10 items, so the poison item shares it with everyone.
	p := newPipeline(t, NewPostgresSink(pool), Config{BatchSize: 60, FlushInterval: time.Hour})
	pages := makePages(12, 6, 1, 10)
	pages[3][0][4].Data = json.RawMessage(`{"n":1e1000000}`)
	errs := make([]error, len(pages))
	var wg sync.WaitGroup
	for w := range pages {
		wg.Go(func() { errs[w] = p.Write(context.Background(), pages[w][0]) })
	}
	wg.Wait()
	for w, err := range errs {
		if w == 3 {
			if !errors.Is(err, ErrInvalidItem) || !strings.Contains(err.Error(), "numeric") {
				t.Errorf("writer of the poison item got %v, want ErrInvalidItem from Postgres", err)
			}
		} else if err != nil {
			t.Errorf("writer %d: %v", w, err)
		}
	}
	got := runKeys(t, pool, 12)
	if got[pages[3][0][4].Key] {
		t.Error("the poison item was stored")
	}
	for k := range got {
		if strings.HasPrefix(k, "w03-") {
			delete(got, k) // the rest of the failed call may or may not be stored
		}
	}
	assertKeys(t, got, [][]Item{pages[0][0], pages[1][0], pages[2][0], pages[4][0], pages[5][0]})
	if s := p.Stats(); s.Rejected != 1 || s.BufferedItems != 0 {
		t.Errorf("stats: %+v, want 1 rejected call and an empty buffer", s)
	}
}
