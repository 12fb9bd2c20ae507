//go:build !windows

package browser

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"crawlq/internal/fetch"
	"crawlq/internal/testwait"
)

// site is the loopback test server: the pages a browser must render, with a count of the
// requests each path received.
type site struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	// gate holds /gate requests until closed; gateHit receives one value per /gate request.
	gate    chan struct{}
	gateHit chan struct{}
	release func() // opens the gate
	inGate  atomic.Int64
	maxGate atomic.Int64
}

func (s *site) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

const jsPage = `<!doctype html><html><head><title>js</title></head><body><ul id="list"></ul>
<script>
const ul = document.getElementById("list");
for (let i = 1; i <= 5; i++) { const li = document.createElement("li"); li.className = "item"; li.textContent = "item-" + i; ul.appendChild(li); }
</script></body></html>`

const latePage = `<!doctype html><html><body><p>early</p>
<script>setTimeout(() => { const d = document.createElement("div"); d.id = "late"; d.textContent = "late-content"; document.body.appendChild(d); }, 300);</script>
</body></html>`

// idlePage draws its items from two API calls made after the load event.
const idlePage = `<!doctype html><html><body><ul id="list"></ul>
<script>
window.addEventListener("load", () => setTimeout(async () => {
  for (const part of ["a", "b"]) {
    const items = await (await fetch("/api/items?part=" + part)).json();
    for (const it of items) { const li = document.createElement("li"); li.className = "api"; li.textContent = it; document.getElementById("list").appendChild(li); }
  }
}, 100));
</script></body></html>`

// lazyPage loads 4 more pages of 20 tall rows each time the end of the list comes into view.
const lazyPage = `<!doctype html><html><head><style>.row{height:60px}</style></head><body><div id="list"></div><div id="end">end</div>
<script>
let page = 0, loading = false;
function add(rows) { for (const r of rows) { const d = document.createElement("div"); d.className = "row"; d.textContent = r; document.getElementById("list").appendChild(d); } }
add(Array.from({length: 20}, (_, i) => "row-0-" + i));
new IntersectionObserver(async (entries) => {
  if (!entries[0].isIntersecting || loading || page >= 4) return;
  loading = true; page++;
  add(await (await fetch("/lazy/more?page=" + page)).json());
  loading = false;
}).observe(document.getElementById("end"));
</script></body></html>`

const mediaPage = `<!doctype html><html><head><style>@font-face{font-family:F;src:url(/font.woff2)} body{font-family:F}</style></head>
<body><p>media</p><img src="/pic.png"><video src="/clip.mp4" autoplay muted></video></body></html>`

// guardPage tries to reach a private address from the page in ways request interception sees.
const guardPage = `<!doctype html><html><body><div id="out"></div>
<script>
fetch("http://10.0.0.5/secret").then(() => { out("fetched"); }, () => { out("fetch-refused"); });
function out(s) { const d = document.createElement("div"); d.id = "result"; d.textContent = s; document.getElementById("out").appendChild(d); }
</script></body></html>`

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{hits: map[string]int{}, gate: make(chan struct{}), gateHit: make(chan struct{}, 10)}
	s.release = sync.OnceFunc(func() { close(s.gate) })
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("X-Test", "yes")
			io.WriteString(w, body)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/js", page(jsPage))
	mux.HandleFunc("/late", page(latePage))
	mux.HandleFunc("/idle", page(idlePage))
	mux.HandleFunc("/lazy", page(lazyPage))
	mux.HandleFunc("/media", page(mediaPage))
	mux.HandleFunc("/guard", page(guardPage))
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<html><body>gone</body></html>")
	})
	mux.HandleFunc("/stuck", page(`<!doctype html><html><body><p>loaded</p><script>fetch("/gate")</script></body></html>`))
	mux.HandleFunc("/redirect-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.0.0.5/admin", http.StatusFound)
	})
	mux.HandleFunc("/api/items", func(w http.ResponseWriter, r *http.Request) {
		part := r.URL.Query().Get("part")
		fmt.Fprintf(w, `["api-%s-1","api-%s-2"]`, part, part)
	})
	mux.HandleFunc("/lazy/more", func(w http.ResponseWriter, r *http.Request) {
		n := r.URL.Query().Get("page")
		rows := make([]string, 20)
		for i := range rows {
			rows[i] = strconv.Quote(fmt.Sprintf("row-%s-%d", n, i))
		}
		fmt.Fprintf(w, "[%s]", strings.Join(rows, ","))
	})
	mux.HandleFunc("/gate", func(w http.ResponseWriter, r *http.Request) {
		n := s.inGate.Add(1)
		defer s.inGate.Add(-1)
		for m := s.maxGate.Load(); n > m && !s.maxGate.CompareAndSwap(m, n); m = s.maxGate.Load() {
		}
		s.gateHit <- struct{}{}
		select {
		case <-s.gate:
		case <-r.Context().Done():
		}
		io.WriteString(w, "<html><body>released</body></html>")
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.release()
		s.Close()
	})
	return s
}

// dialLog records the connections the guard proxy was asked to make. It never dials an address
// that is not loopback: such an address is passed to the real guarded dialer only once the guard
// is known to refuse it, so the test itself cannot send a packet off this machine.
type dialLog struct {
	t       *testing.T
	mu      sync.Mutex
	addrs   []string
	refused []string
}

func (d *dialLog) hook(ctx context.Context, network, addr string, next func(context.Context, string, string) (net.Conn, error)) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	host, _, _ := net.SplitHostPort(addr)
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		if err == nil && fetch.CheckAddr(ip, true, false) != nil {
			c, derr := next(ctx, network, addr) // refused by Control before connect()
			if !errors.Is(derr, fetch.ErrForbiddenAddress) {
				if c != nil {
					c.Close()
				}
				d.t.Errorf("guard did not refuse %s: %v", addr, derr)
			}
			d.mu.Lock()
			d.refused = append(d.refused, addr)
			d.mu.Unlock()
			return nil, derr
		}
		d.t.Errorf("browser asked the proxy for a non-loopback address %q", addr)
		return nil, fmt.Errorf("test: no traffic off loopback (%s)", addr)
	}
	return next(ctx, network, addr)
}

func (d *dialLog) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

func newTestPool(t *testing.T, cfg Config) (*Pool, *dialLog) {
	t.Helper()
	if _, err := FindChromium(cfg.ExecPath); err != nil {
		t.Fatalf("%v (scripts/deps.sh test installs it)", err)
	}
	dl := &dialLog{t: t}
	cfg.AllowLoopback = true
	cfg.dialHook = dl.hook
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if n := chromiumProcesses(p); n != 0 {
			t.Errorf("%d Chromium processes of the pool left after Close", n)
		}
	})
	return p, dl
}

// chromiumProcesses counts the live processes started for this pool (their command line
// names its proxy), zombies excluded.
func chromiumProcesses(p *Pool) int {
	want := []byte("--proxy-server=http://" + p.proxy.addr())
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmd, want) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && bytes.HasPrefix(bytes.TrimSpace(st[i+1:]), []byte("Z")) {
				continue
			}
		}
		n++
	}
	return n
}

func render(t *testing.T, p *Pool, req Request) *Result {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 20 * time.Second
	}
	res, err := p.Render(context.Background(), req)
	if err != nil {
		t.Fatalf("render %s: %v", req.URL, err)
	}
	return res
}

func TestRendersJavaScriptItems(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, dl := newTestPool(t, Config{})
	resp, err := http.Get(s.URL + "/js")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(raw), "item-3") {
		t.Fatal("the raw page already has the items; the test proves nothing")
	}
	res := render(t, p, Request{URL: s.URL + "/js"})
	for i := 1; i <= 5; i++ {
		if !strings.Contains(res.HTML, fmt.Sprintf(`<li class="item">item-%d</li>`, i)) {
			t.Fatalf("rendered HTML lacks item-%d:\n%s", i, res.HTML)
		}
	}
	if res.Status != 200 || res.Header.Get("X-Test") != "yes" || res.URL != s.URL+"/js" {
		t.Fatalf("status %d, X-Test %q, URL %q", res.Status, res.Header.Get("X-Test"), res.URL)
	}
	if !strings.HasPrefix(res.HTML, "<!DOCTYPE html>") {
		t.Fatalf("HTML does not start with its doctype: %.40q", res.HTML)
	}
	// Every connection went through the guard proxy, to the test server only.
	host := strings.TrimPrefix(s.URL, "http://")
	for _, a := range dl.seen() {
		if a != host {
			t.Fatalf("proxy dialed %s, not the test server %s", a, host)
		}
	}
	if len(dl.seen()) == 0 {
		t.Fatal("Chromium did not go through the guard proxy")
	}

	res, err = p.Render(context.Background(), Request{URL: s.URL + "/missing", Timeout: 20 * time.Second})
	var se *fetch.StatusError
	if !errors.As(err, &se) || se.Code != 404 || res == nil || !strings.Contains(res.HTML, "gone") {
		t.Fatalf("404 page: err %v, result %+v", err, res)
	}
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{TabsPerBrowser: 3})
	render(t, p, Request{URL: s.URL + "/js"}) // the browser is up before the 2 s timeout below runs
	t.Run("selector appearing after 300ms", func(t *testing.T) {
		t.Parallel()
		res := render(t, p, Request{URL: s.URL + "/late", WaitFor: "#late"})
		if !strings.Contains(res.HTML, "late-content") {
			t.Fatalf("no #late in %s", res.HTML)
		}
	})
	t.Run("networkidle", func(t *testing.T) {
		t.Parallel()
		res := render(t, p, Request{URL: s.URL + "/idle", WaitFor: "networkidle"})
		for _, want := range []string{"api-a-1", "api-a-2", "api-b-1", "api-b-2"} {
			if !strings.Contains(res.HTML, want) {
				t.Fatalf("no %s after network idle: %s", want, res.HTML)
			}
		}
	})
	t.Run("fixed duration", func(t *testing.T) {
		t.Parallel()
		res := render(t, p, Request{URL: s.URL + "/late", WaitFor: "1s"})
		if !strings.Contains(res.HTML, "late-content") {
			t.Fatalf("no #late after waiting 1s (it appears after 300ms): %s", res.HTML)
		}
	})
	// Not parallel: it runs first, alone in the pool, so its 2 s are the page's.
	t.Run("selector never appearing times out with a screenshot", func(t *testing.T) {
		res, err := p.Render(context.Background(), Request{URL: s.URL + "/late", WaitFor: "#never", Timeout: 2 * time.Second, ScreenshotOnFailure: true})
		if !errors.Is(err, fetch.ErrTimeout) || !fetch.Retryable(err) {
			t.Fatalf("want a retryable timeout, got %v", err)
		}
		if res == nil || !bytes.HasPrefix(res.Screenshot, []byte("\x89PNG")) || !strings.Contains(res.HTML, "early") {
			t.Fatalf("failed render kept no PNG screenshot or HTML: %+v", res)
		}
		if st := p.Stats(); st.HungKilled != 0 || st.Launches != 1 {
			t.Fatalf("a slow page is not a hung browser: %+v", st)
		}
	})
	t.Run("bad wait_for", func(t *testing.T) {
		t.Parallel()
		_, err := p.Render(context.Background(), Request{URL: s.URL + "/late", WaitFor: "div[["})
		if err == nil || !strings.Contains(err.Error(), "wait_for") {
			t.Fatalf("want an error naming wait_for, got %v", err)
		}
	})
}

func TestScrollToBottomLoadsLazyList(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{})
	res := render(t, p, Request{URL: s.URL + "/lazy"})
	if n := strings.Count(res.HTML, `class="row"`); n != 20 {
		t.Fatalf("without scrolling: %d rows, want the first 20", n)
	}
	res = render(t, p, Request{URL: s.URL + "/lazy", ScrollToBottom: true})
	if n := strings.Count(res.HTML, `class="row"`); n != 100 {
		t.Fatalf("after scrolling: %d rows, want 100 (5 pages of 20)", n)
	}
	if !strings.Contains(res.HTML, "row-4-19") || s.count("/lazy/more") != 4 {
		t.Fatalf("last row missing or %d page loads (want 4)", s.count("/lazy/more"))
	}
}

func TestBlocksImagesFontsMedia(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{})
	res := render(t, p, Request{URL: s.URL + "/media", WaitFor: "networkidle"})
	for _, path := range []string{"/pic.png", "/font.woff2", "/clip.mp4"} {
		if n := s.count(path); n != 0 {
			t.Errorf("server got %d requests for %s; blocked by default", n, path)
		}
	}
	if res.Blocked == 0 {
		t.Fatalf("no request counted as blocked: %+v", res)
	}
	// The same page with nothing blocked does fetch the image: the check above can fail.
	render(t, p, Request{URL: s.URL + "/media", WaitFor: "networkidle", BlockResources: []string{}})
	if s.count("/pic.png") == 0 {
		t.Fatal("with nothing blocked the image was not requested either; the test proves nothing")
	}
	if _, err := p.Render(context.Background(), Request{URL: s.URL + "/media", BlockResources: []string{"gif"}}); err == nil || !strings.Contains(err.Error(), "block_resources") {
		t.Fatalf("want an error naming block_resources, got %v", err)
	}
}

func TestRecyclesAfterNPages(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{PagesPerBrowser: 3})
	pids := map[int]bool{}
	for i := 0; i < 7; i++ {
		render(t, p, Request{URL: s.URL + "/js"})
		p.mu.Lock()
		for _, in := range p.insts {
			pids[in.pid] = true
		}
		p.mu.Unlock()
	}
	st := p.Stats()
	if st.Launches != 3 || st.RecycledPages != 2 || len(pids) != 3 {
		t.Fatalf("7 pages at 3 per browser: %d launches, %d recycled, %d pids; want 3, 2, 3", st.Launches, st.RecycledPages, len(pids))
	}
	if st.Browsers > 1 {
		t.Fatalf("%d browsers at once with Browsers=1", st.Browsers)
	}
}

func TestRecyclesPastMemoryLimit(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{MaxBrowserMemory: 64 << 20})
	render(t, p, Request{URL: s.URL + "/js"})
	render(t, p, Request{URL: s.URL + "/js"})
	st := p.Stats()
	if st.RecycledMemory != 2 || st.Launches != 2 || st.PeakBrowserMem <= 64<<20 {
		t.Fatalf("an idle Chromium tree is over 64 MiB, so each page recycles: %+v", st)
	}
	t.Logf("browser tree RSS after a page: %d MiB", st.PeakBrowserMem>>20)
}

// waitGate waits until the test server holds a /gate request (the page is mid-render).
func waitGate(t *testing.T, s *site) {
	t.Helper()
	select {
	case <-s.gateHit:
	case <-time.After(30 * time.Second):
		t.Fatal("the page never reached the server")
	}
}

func TestHungBrowserIsKilledAndReplaced(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{HangGrace: time.Second})
	render(t, p, Request{URL: s.URL + "/js"})
	pid := p.insts[0].pid
	errc := make(chan error, 1)
	go func() {
		_, err := p.Render(context.Background(), Request{URL: s.URL + "/gate", Timeout: 3 * time.Second})
		errc <- err
	}()
	waitGate(t, s)
	// A real hang: the browser process stops answering.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, fetch.ErrTimeout) || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("want a timeout that killed the browser, got %v", err)
	}
	res := render(t, p, Request{URL: s.URL + "/js"})
	if !strings.Contains(res.HTML, "item-5") {
		t.Fatal("the fresh browser did not render")
	}
	st := p.Stats()
	if st.HungKilled != 1 || st.Launches != 2 || st.Crashes != 0 {
		t.Fatalf("want 1 hung browser killed, 2 launches, no crash: %+v", st)
	}
	if p.insts[0].pid == pid {
		t.Fatal("still the hung browser")
	}
}

func TestCrashedBrowserIsReportedAndReplaced(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{})
	render(t, p, Request{URL: s.URL + "/js"})
	pid := p.insts[0].pid
	errc := make(chan error, 1)
	go func() {
		_, err := p.Render(context.Background(), Request{URL: s.URL + "/gate", Timeout: 30 * time.Second})
		errc <- err
	}()
	waitGate(t, s)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, ErrBrowserCrashed) || errors.Is(err, fetch.ErrTimeout) {
		t.Fatalf("want ErrBrowserCrashed, got %v", err)
	}
	res := render(t, p, Request{URL: s.URL + "/js"})
	if !strings.Contains(res.HTML, "item-5") {
		t.Fatal("the pool did not recover")
	}
	if st := p.Stats(); st.Crashes != 1 || st.Launches != 2 {
		t.Fatalf("want 1 crash and 2 launches: %+v", st)
	}
}

func TestMemoryBoundedOverManyRenders(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("18 renders")
	}
	s := newSite(t)
	const limit = 1 << 30
	p, _ := newTestPool(t, Config{Browsers: 1, TabsPerBrowser: 2, PagesPerBrowser: 6, MaxBrowserMemory: limit})
	var peak, first6, last6 int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for batch := 0; batch < 9; batch++ {
		for j := 0; j < 2; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Render(context.Background(), Request{URL: s.URL + "/js", Timeout: 30 * time.Second}); err != nil {
					failed.Add(1)
					t.Errorf("render: %v", err)
				}
			}()
		}
		wg.Wait()
		rss := p.Stats().LastBrowserMem
		peak = max(peak, rss)
		if batch < 3 {
			first6 = max(first6, rss)
		} else if batch >= 6 {
			last6 = max(last6, rss)
		}
	}
	st := p.Stats()
	t.Logf("18 renders: %d launches, %d recycled by pages, %d by memory; browser tree memory peak %d MiB (first 6 pages %d MiB, last 6 %d MiB)",
		st.Launches, st.RecycledPages, st.RecycledMemory, peak>>20, first6>>20, last6>>20)
	if failed.Load() != 0 || st.Renders != 18 || st.Launches != 3 {
		t.Fatalf("want 18 renders on 3 browsers: %+v", st)
	}
	if peak == 0 || peak > limit || last6 > 2*first6 {
		t.Fatalf("memory not bounded: peak %d, first 6 %d, last 6 %d", peak, first6, last6)
	}
	if n := chromiumProcesses(p); n > 15 {
		t.Fatalf("%d Chromium processes for one browser", n)
	}
}

func TestRefusesNonPublicAddresses(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, dl := newTestPool(t, Config{})
	for _, u := range []string{"http://10.0.0.5/", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:10.0.0.5]/"} {
		_, err := p.Render(context.Background(), Request{URL: u})
		var re *fetch.RefusedError
		if !errors.Is(err, fetch.ErrForbiddenAddress) || !errors.As(err, &re) {
			t.Fatalf("%s: want a refusal, got %v", u, err)
		}
	}
	if st := p.Stats(); st.Launches != 0 || st.Renders != 0 {
		t.Fatalf("refused before any browser or navigation: %+v", st)
	}
	// A loopback page that asks for a private address from its script: paused and refused
	// inside Chromium, never dialed.
	res := render(t, p, Request{URL: s.URL + "/guard", WaitFor: "#result"})
	if !strings.Contains(res.HTML, "fetch-refused") || len(res.Refused) != 1 || res.Refused[0] != "http://10.0.0.5/secret" {
		t.Fatalf("the page's request to 10.0.0.5 was not refused: refused %v, HTML %s", res.Refused, res.HTML)
	}
	// A redirect to a private address: the redirected request is paused and refused too.
	_, err := p.Render(context.Background(), Request{URL: s.URL + "/redirect-private", Timeout: 20 * time.Second})
	if !errors.Is(err, fetch.ErrForbiddenAddress) || !strings.Contains(err.Error(), "10.0.0.5") {
		t.Fatalf("redirect to 10.0.0.5: want a refusal, got %v", err)
	}
	for _, a := range dl.seen() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("proxy was asked for %s", a)
		}
	}

	// Loopback itself is refused unless allowed.
	strict, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	for _, u := range []string{s.URL + "/js", strings.Replace(s.URL, "127.0.0.1", "localhost", 1) + "/js"} {
		if _, err := strict.Render(context.Background(), Request{URL: u}); !errors.Is(err, fetch.ErrForbiddenAddress) {
			t.Fatalf("%s without AllowLoopback: want a refusal, got %v", u, err)
		}
	}
	if s.count("/js") != 0 {
		t.Fatal("the refused loopback page was fetched")
	}
}

// TestGuardProxyRefusesAtDial: what interception cannot see (a WebSocket, a name that resolves
// to a private address) reaches the proxy, whose dialer refuses it before connect().
func TestGuardProxyRefusesAtDial(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, err := New(Config{}) // loopback not allowed
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	target := strings.TrimPrefix(s.URL, "http://")
	// A connection no page asked for (Chromium's own updates, sign-in) is refused outright.
	c0 := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(mustURL(t, "http://"+p.proxy.addr()))}}
	r0, err := c0.Get(s.URL + "/js")
	if err != nil {
		t.Fatal(err)
	}
	b0, _ := io.ReadAll(r0.Body)
	r0.Body.Close()
	if r0.StatusCode != http.StatusForbidden || !strings.Contains(string(b0), "no page asked for") {
		t.Fatalf("unasked GET via the proxy: %d %s", r0.StatusCode, b0)
	}
	// One a page asked for still meets the address guard at dial time.
	p.ask(map[string]bool{}, target)
	conn, err := net.Dial("tcp", p.proxy.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "loopback") {
		t.Fatalf("CONNECT to loopback: %d %s", resp.StatusCode, body)
	}
	// Plain HTTP through the proxy too.
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(mustURL(t, "http://"+p.proxy.addr()))}}
	r2, err := c.Get(s.URL + "/js")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusForbidden || s.count("/js") != 0 {
		t.Fatalf("GET via the proxy: %d, server hits %d", r2.StatusCode, s.count("/js"))
	}
	if p.Stats().Refused != 2 {
		t.Fatalf("refusals not counted: %+v", p.Stats())
	}
}

func TestConfigValidation(t *testing.T) {
	// Not parallel: it sets PATH (t.Setenv).
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Browsers: -1}, "Browsers"},
		{Config{TabsPerBrowser: -2}, "TabsPerBrowser"},
		{Config{MaxBrowserMemory: 1 << 20}, "MaxBrowserMemory"},
		{Config{PageTimeout: -time.Second}, "PageTimeout"},
		{Config{ExecPath: "/nonexistent/chromium"}, "/nonexistent/chromium"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: want an error naming %s, got %v", c.cfg, c.want, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	_, err := New(Config{})
	if !errors.Is(err, ErrNoBrowser) || !strings.Contains(err.Error(), "chromium, chromium-browser, google-chrome") {
		t.Fatalf("no browser on PATH: %v", err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// descendants lists the processes under pid whose command line has want.
func descendants(pid int, want string) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		f := bytes.Fields(st[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		children[ppid] = append(children[ppid], child)
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		queue = append(queue, children[c]...)
		if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(c) + "/cmdline"); err == nil && bytes.Contains(cmd, []byte(want)) {
			out = append(out, c)
		}
	}
	return out
}

func TestRendererCrashIsReported(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{})
	render(t, p, Request{URL: s.URL + "/js"})
	pid := p.insts[0].pid
	errc := make(chan error, 1)
	go func() {
		_, err := p.Render(context.Background(), Request{URL: s.URL + "/stuck", WaitFor: "#never", Timeout: 60 * time.Second})
		errc <- err
	}()
	waitGate(t, s) // the page has loaded and its script is waiting on the server
	renderers := descendants(pid, "--type=renderer")
	if len(renderers) == 0 {
		t.Fatal("no renderer process under the browser")
	}
	for _, r := range renderers {
		syscall.Kill(r, syscall.SIGKILL)
	}
	err := <-errc
	if !errors.Is(err, ErrRendererCrashed) || !errors.Is(err, ErrBrowserCrashed) {
		t.Fatalf("want ErrRendererCrashed, got %v", err)
	}
	res := render(t, p, Request{URL: s.URL + "/js"})
	if !strings.Contains(res.HTML, "item-5") {
		t.Fatal("the browser did not render after its renderer died")
	}
	if st := p.Stats(); st.RendererCrashes != 1 || st.Launches != 1 || st.Crashes != 0 {
		t.Fatalf("want 1 renderer crash on the same browser: %+v", st)
	}
}

func TestBoundsBrowsersAndTabs(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, _ := newTestPool(t, Config{Browsers: 2, TabsPerBrowser: 2})
	const n = 6
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := p.Render(context.Background(), Request{URL: s.URL + "/gate", Timeout: 60 * time.Second})
			errc <- err
		}()
	}
	for i := 0; i < 4; i++ {
		waitGate(t, s)
	}
	// Four pages hold both browsers' tabs; the other two wait for a tab.
	testwait.For(t, fmt.Sprintf("%d renders waiting", n-4), func() (Stats, bool) {
		st := p.Stats()
		return st, st.Waiting == n-4
	})
	if st := p.Stats(); st.Browsers != 2 || st.Tabs != 4 || s.inGate.Load() != 4 {
		t.Fatalf("want 2 browsers, 4 tabs, 4 pages at the server: %+v, %d at the server", st, s.inGate.Load())
	}
	s.release()
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Launches != 2 || s.maxGate.Load() != 4 {
		t.Fatalf("want 2 launches and at most 4 pages at once: %+v, max %d", st, s.maxGate.Load())
	}
}
