//go:build linux

package browser

import (
	"context"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"crawlq/internal/demosite"
)

// Soak bounds: a browser's process tree is recycled past soakBrowserBound (MaxBrowserMemory),
// and this process (the runner's part: the pool, its guard proxy, the CDP traffic) stays under
// soakProcessBound.
const (
	soakBrowserBound = 1 << 30
	soakProcessBound = 512 << 20
)

// BenchmarkRenderSoak renders b.N of the demo site's script-drawn item pages, 2 at a time, on one
// browser recycled every 100 pages, and reports the peak memory of a browser's process tree
// (summed PSS, after each page) and of this process (VmHWM), failing past their bounds. The soak
// of docs/browser.md: go test -run XXX -bench RenderSoak -benchtime 2000x ./internal/browser
func BenchmarkRenderSoak(b *testing.B) {
	if _, err := FindChromium(""); err != nil {
		b.Fatal(err)
	}
	site := demosite.New(demosite.Config{Items: 1000})
	srv := httptest.NewServer(site)
	defer srv.Close()
	p, err := New(Config{Browsers: 1, TabsPerBrowser: 2, PagesPerBrowser: 100, MaxBrowserMemory: soakBrowserBound, AllowLoopback: true})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var next, failed atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := next.Add(1)
				if k > int64(b.N) {
					return
				}
				url := srv.URL + demosite.JSPrefix + "item-" + strconv.FormatInt((k-1)%1000+1, 10) + ".html"
				r, err := p.Render(context.Background(), Request{URL: url, WaitFor: "div.product", Timeout: 60 * time.Second})
				if err != nil || !strings.Contains(r.HTML, `class="sku"`) {
					failed.Add(1)
					b.Errorf("render %s: %v", url, err)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	st := p.Stats()
	hwm := peakRSS(b)
	b.ReportMetric(float64(st.PeakBrowserMem>>20), "browser-peak-MiB")
	b.ReportMetric(float64(hwm>>20), "process-peak-MiB")
	b.ReportMetric(float64(st.Launches), "launches")
	b.Logf("%d pages: %d launches (%d recycled by pages, %d by memory, %d crashes); browser tree peak %d MiB, this process's peak %d MiB",
		b.N, st.Launches, st.RecycledPages, st.RecycledMemory, st.Crashes, st.PeakBrowserMem>>20, hwm>>20)
	if failed.Load() > 0 || st.Renders != int64(b.N) {
		b.Fatalf("%d of %d renders failed (%d reached a browser)", failed.Load(), b.N, st.Renders)
	}
	if want := int64((b.N + 99) / 100); st.Launches < want {
		b.Fatalf("%d launches for %d pages: not recycled every 100", st.Launches, b.N)
	}
	if !st.MemoryMeasured || st.PeakBrowserMem == 0 || st.PeakBrowserMem > soakBrowserBound || hwm > soakProcessBound {
		b.Fatalf("memory not bounded: browser tree peak %d MiB (bound %d), this process's %d MiB (bound %d)",
			st.PeakBrowserMem>>20, soakBrowserBound>>20, hwm>>20, soakProcessBound>>20)
	}
}

// peakRSS is this process's peak resident memory (VmHWM).
func peakRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
