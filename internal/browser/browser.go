// Package browser renders pages with the system's headless Chromium over the DevTools protocol
// (chromedp): a Pool of bounded browsers and tabs, each browser recycled after a number of pages
// or past a memory limit, killed and replaced when it hangs, and a crash of Chromium told apart
// (ErrBrowserCrashed) from a failure of the page.
//
// Every request of a rendered page is held to the plain fetcher's address guard
// (internal/fetch): the page's URL is judged before any navigation, each request Chromium makes
// is paused (the Fetch domain) and refused when its host is a non-public IP, and every
// connection Chromium opens goes through a loopback proxy inside this process whose dialer
// judges the resolved address at connect time (what request interception cannot see:
// WebSockets, service workers, DNS answers that change).
//
// It knows nothing about jobs, politeness or robots.txt; internal/crawl composes those.
package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/andybalholm/cascadia"
	"github.com/chromedp/cdproto/cdp"
	cdpfetch "github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"crawlq/internal/clock"
	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
)

// Sentinel errors callers branch on. Match them with errors.Is.
var (
	// ErrBrowserCrashed: the Chromium process died under the page (killed, crashed, out of
	// memory) without the page's timeout having passed. The page is not to blame: a caller can
	// retry it without counting an attempt (bounded by its own limit, in case a page does crash
	// every browser). The pool has already replaced the browser.
	ErrBrowserCrashed = errors.New("browser crashed")
	// ErrRendererCrashed: the page's renderer process died (killed, out of memory) while the
	// browser lived on. It matches ErrBrowserCrashed too; a caller that wants to charge a page
	// whose renderer keeps dying can tell it apart.
	ErrRendererCrashed = fmt.Errorf("%w: the page's renderer process died", ErrBrowserCrashed)
	// ErrNoBrowser: no Chromium executable was found (Config.ExecPath, or chromium,
	// chromium-browser, google-chrome, google-chrome-stable on PATH).
	ErrNoBrowser = errors.New("no chromium browser found")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("browser pool closed")
)

// searchNames are the executables looked up on PATH when Config.ExecPath is empty, in order.
var searchNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Config tunes a Pool. The zero value is valid: every field has a default.
type Config struct {
	// ExecPath is the Chromium executable. Default: the first of chromium, chromium-browser,
	// google-chrome, google-chrome-stable found on PATH.
	ExecPath string
	// Browsers bounds the Chromium processes the pool runs at once, those being recycled
	// included. Default 1.
	Browsers int
	// TabsPerBrowser bounds the pages one browser renders at once. Default 2.
	TabsPerBrowser int
	// PagesPerBrowser recycles a browser after it has been given this many pages. Default 100.
	PagesPerBrowser int
	// MaxBrowserMemory recycles a browser once the resident memory of its process tree (the
	// browser, zygote, renderers, GPU and network processes; from /proc, so Linux only: each
	// process's proportional set size, summed, so shared pages count once) passes it, measured
	// after each page. Default 1 GiB.
	MaxBrowserMemory int64
	// PageTimeout is a Request's timeout when it sets none. Default 30s.
	PageTimeout time.Duration
	// HangGrace is how long a browser has, after a page's timeout, to close the page and answer;
	// past it the browser is taken for hung, killed and replaced. Default 5s.
	HangGrace time.Duration
	// LaunchTimeout bounds the start of a browser. Default 30s.
	LaunchTimeout time.Duration
	// AllowPrivate lets pages reach addresses that are not public (loopback, private, link-local,
	// cloud metadata), as fetch.Config.AllowPrivate. Default false.
	AllowPrivate bool
	// AllowLoopback lets pages reach loopback addresses only, as fetch.Config.AllowLoopback.
	AllowLoopback bool
	// UserAgent overrides Chromium's user agent. Default: Chromium's own.
	UserAgent string
	// Logger receives the pool's events (launches, recycles, crashes, refused requests).
	// Default slog.Default().
	Logger *slog.Logger

	// dialHook, when set (tests), makes every connection of the guard proxy instead of the
	// guarded dialer, which it is given.
	dialHook func(ctx context.Context, network, addr string, next func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error)
}

func (c *Config) validate() error {
	checks := []struct {
		name string
		bad  bool
	}{
		{"Browsers", c.Browsers < 0},
		{"TabsPerBrowser", c.TabsPerBrowser < 0},
		{"PagesPerBrowser", c.PagesPerBrowser < 0},
		{"MaxBrowserMemory", c.MaxBrowserMemory < 0},
		{"PageTimeout", c.PageTimeout < 0},
		{"HangGrace", c.HangGrace < 0},
		{"LaunchTimeout", c.LaunchTimeout < 0},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("browser config: %s must not be negative (0 takes the default)", ch.name)
		}
	}
	if c.MaxBrowserMemory > 0 && c.MaxBrowserMemory < 64<<20 {
		return fmt.Errorf("browser config: MaxBrowserMemory %d bytes is below 64 MiB, less than an idle Chromium", c.MaxBrowserMemory)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Browsers, 1)
	def(&c.TabsPerBrowser, 2)
	def(&c.PagesPerBrowser, 100)
	if c.MaxBrowserMemory == 0 {
		c.MaxBrowserMemory = 1 << 30
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&c.PageTimeout, 30*time.Second)
	defDur(&c.HangGrace, 5*time.Second)
	defDur(&c.LaunchTimeout, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// FindChromium returns the Chromium executable: path when given (it must exist and be
// executable), else the first of chromium, chromium-browser, google-chrome,
// google-chrome-stable on PATH. Its error matches ErrNoBrowser and names what was looked for.
func FindChromium(path string) (string, error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("%w: ExecPath %q: %v", ErrNoBrowser, path, err)
		}
		return p, nil
	}
	for _, name := range searchNames {
		if p, err := exec.LookPath(name); err == nil {
			return unwrap(p), nil
		}
	}
	return "", fmt.Errorf("%w: none of %s on PATH; install Chromium (Debian: apt-get install chromium) or set the browser's exec path",
		ErrNoBrowser, strings.Join(searchNames, ", "))
}

// wrapped maps distributions' launcher scripts to the binary they start. Debian's
// /usr/bin/chromium adds flags from /etc/chromium.d, among them --enable-remote-extensions,
// which has Chromium fetch extension updates from the internet on its own; the binary itself
// takes only the pool's flags.
var wrapped = map[string]string{
	"/usr/bin/chromium":         "/usr/lib/chromium/chromium",
	"/usr/bin/chromium-browser": "/usr/lib/chromium-browser/chromium-browser",
}

// unwrap returns the binary a known launcher script starts, or path.
func unwrap(path string) string {
	bin, ok := wrapped[path]
	if !ok {
		return path
	}
	head := make([]byte, 2)
	f, err := os.Open(path)
	if err != nil {
		return path
	}
	defer f.Close()
	if _, err := io.ReadFull(f, head); err != nil || string(head) != "#!" {
		return path // not a script: the binary itself
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		return path
	}
	return bin
}

// Stats are a pool's counters since New.
type Stats struct {
	Launches        int64 // browsers started
	Renders         int64 // Render calls that reached a browser
	RecycledPages   int64 // browsers retired after PagesPerBrowser pages
	RecycledMemory  int64 // browsers retired past MaxBrowserMemory
	Crashes         int64 // browsers that died under the pool (ErrBrowserCrashed)
	RendererCrashes int64 // pages whose renderer died (ErrRendererCrashed)
	HungKilled      int64 // browsers killed because they did not answer after a page's timeout
	Refused         int64 // requests refused by the address guard (interception and proxy)
	Blocked         int64 // requests of blocked resource types (images, fonts, media...)
	Browsers        int   // browsers running now
	Tabs            int   // pages rendering now
	Waiting         int   // Render calls waiting for a tab now (all Browsers x TabsPerBrowser busy)
	PeakBrowserMem  int64 // highest resident memory (summed PSS) of one browser's process tree after a page
	MemoryMeasured  bool  // false on OSes where it is not read (the memory limit is not enforced)
	LastBrowserMem  int64 // the same, of the last browser measured
	BrowserPIDsSeen int   // distinct browser processes started (for tests and logs)
}

// instance is one running Chromium.
type instance struct {
	id       int64
	pid      int
	ctx      context.Context // the browser's chromedp context (its first tab)
	cancel   context.CancelFunc
	allocEnd context.CancelFunc // kills the process and waits for its cleanup
	lost     <-chan struct{}    // closed when the connection to Chromium drops

	// Guarded by Pool.mu.
	assigned int // pages given to it
	active   int // pages rendering on it now
	retiring string
	closing  bool

	killedByPool atomic.Bool
}

// dead reports whether the browser's connection is gone.
func (in *instance) dead() bool {
	select {
	case <-in.lost:
		return true
	default:
		return false
	}
}

// Pool runs Chromium browsers and renders pages on them. Its methods are safe for concurrent use.
type Pool struct {
	cfg      Config
	execPath string
	log      *slog.Logger
	proxy    *guardProxy
	vias     map[*proxy.Proxy]*guardProxy // guard proxies through an upstream, by it (upstream.go); guarded by mu

	mu        sync.Mutex
	insts     []*instance
	launching int
	waiting   int
	changed   chan struct{} // closed and replaced when a slot may have freed
	closed    bool
	nextID    int64
	stats     Stats
	wg        sync.WaitGroup // closers and crash watchers

	// asked counts, per host:port, the renders in flight whose page asked for it (a request
	// paused by interception, a WebSocket created): the guard proxy serves only these, so
	// Chromium's own traffic (extension and component updates, sign-in) goes nowhere.
	askedMu      sync.Mutex
	asked        map[string]int
	askedChanged chan struct{}
}

// New checks the configuration, finds Chromium and starts the pool's guard proxy. Browsers
// start on first use.
func New(cfg Config) (*Pool, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	execPath, err := FindChromium(cfg.ExecPath)
	if err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, execPath: execPath, log: cfg.Logger, changed: make(chan struct{}), vias: map[*proxy.Proxy]*guardProxy{},
		asked: map[string]int{}, askedChanged: make(chan struct{})}
	p.stats.MemoryMeasured = rssSupported
	if !rssSupported {
		p.log.Warn("browser memory is not measured on this OS: MaxBrowserMemory is not enforced, browsers are recycled by page count only")
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		Control: fetch.DialControl(cfg.AllowLoopback, cfg.AllowPrivate)}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		if cfg.dialHook != nil {
			c, err = cfg.dialHook(ctx, network, addr, dialer.DialContext)
		} else {
			c, err = dialer.DialContext(ctx, network, addr)
		}
		if errors.Is(err, fetch.ErrForbiddenAddress) {
			p.mu.Lock()
			p.stats.Refused++
			p.mu.Unlock()
		}
		return c, err
	}
	if p.proxy, err = newGuardProxy(dial, p.admit, p.log); err != nil {
		return nil, fmt.Errorf("start the browser's guard proxy: %w", err)
	}
	return p, nil
}

// hostPort is the asked-map key of a URL: lower-case host and port, the scheme's by default.
func hostPort(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http", "ws":
			port = "80"
		case "https", "wss":
			port = "443"
		default:
			return "", false
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}

// ask records that a render's page asked for hp; the render's done drops its asks.
func (p *Pool) ask(mine map[string]bool, hp string) {
	p.askedMu.Lock()
	defer p.askedMu.Unlock()
	if mine[hp] || mine[doneKey] {
		return
	}
	mine[hp] = true
	p.asked[hp]++
	close(p.askedChanged)
	p.askedChanged = make(chan struct{})
}

// doneKey marks a render's asks as dropped, so an event that comes late asks for nothing.
const doneKey = ""

func (p *Pool) dropAsks(mine map[string]bool) {
	p.askedMu.Lock()
	defer p.askedMu.Unlock()
	mine[doneKey] = true
	for hp := range mine {
		if hp == doneKey {
			continue
		}
		if p.asked[hp]--; p.asked[hp] <= 0 {
			delete(p.asked, hp)
		}
	}
}

// admit tells the guard proxy whether a page asked for hostport. A WebSocket's creation event
// can reach us just after its connection reaches the proxy, so a miss waits a moment.
func (p *Pool) admit(ctx context.Context, hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	key := net.JoinHostPort(strings.ToLower(host), port)
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	for {
		p.askedMu.Lock()
		ok, ch := p.asked[key] > 0, p.askedChanged
		p.askedMu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Browsers = len(p.insts)
	s.Waiting = p.waiting
	for _, in := range p.insts {
		s.Tabs += in.active
	}
	return s
}

// notify wakes the Render calls waiting for a slot. Call with p.mu held.
func (p *Pool) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// acquire gives the caller a tab slot on a browser, launching one when the pool has room.
func (p *Pool) acquire(ctx context.Context) (*instance, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		for _, in := range p.insts {
			if in.retiring == "" && !in.dead() && !in.killedByPool.Load() && in.active < p.cfg.TabsPerBrowser && in.assigned < p.cfg.PagesPerBrowser {
				in.active++
				in.assigned++
				p.mu.Unlock()
				return in, nil
			}
		}
		if len(p.insts)+p.launching < p.cfg.Browsers {
			p.launching++
			p.mu.Unlock()
			in, err := p.launch(ctx)
			p.mu.Lock()
			p.launching--
			p.notify()
			if err != nil {
				p.mu.Unlock()
				return nil, err
			}
			if p.closed {
				p.mu.Unlock()
				in.killedByPool.Store(true)
				p.closeInstance(in)
				return nil, ErrClosed
			}
			in.active, in.assigned = 1, 1
			p.insts = append(p.insts, in)
			p.mu.Unlock()
			return in, nil
		}
		ch := p.changed
		p.waiting++
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait for a browser tab: %w", ctx.Err())
		}
	}
}

// release returns a tab slot, retiring the browser when it has served its pages, passed its
// memory limit or died, and closing it once its last page is done.
func (p *Pool) release(in *instance) {
	var rss int64
	var rssErr error
	if !in.dead() && rssSupported {
		rss, rssErr = treeRSS(in.pid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	in.active--
	if rssErr == nil && rss > 0 {
		p.stats.LastBrowserMem = rss
		p.stats.PeakBrowserMem = max(p.stats.PeakBrowserMem, rss)
	}
	switch {
	case in.retiring != "":
	case in.dead():
		in.retiring = "died"
	case in.assigned >= p.cfg.PagesPerBrowser:
		in.retiring = "pages"
		p.stats.RecycledPages++
		p.log.Info("browser recycled", "browser", in.id, "pid", in.pid, "reason", "pages", "pages", in.assigned)
	case rss > p.cfg.MaxBrowserMemory:
		in.retiring = "memory"
		p.stats.RecycledMemory++
		p.log.Info("browser recycled", "browser", in.id, "pid", in.pid, "reason", "memory", "rss_bytes", rss, "limit_bytes", p.cfg.MaxBrowserMemory)
	}
	if in.retiring != "" && in.active == 0 && !in.closing {
		p.startClose(in)
	}
	p.notify()
}

// startClose closes in in the background; it keeps counting against Config.Browsers until its
// process has exited. Call with p.mu held.
func (p *Pool) startClose(in *instance) {
	in.closing = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.closeInstance(in)
		p.mu.Lock()
		for i, x := range p.insts {
			if x == in {
				p.insts = append(p.insts[:i], p.insts[i+1:]...)
				break
			}
		}
		p.notify()
		p.mu.Unlock()
	}()
}

// closeInstance stops a browser: gracefully when it answers, killed when not, and waits until
// its processes have exited and its profile directory is removed.
func (p *Pool) closeInstance(in *instance) {
	in.killedByPool.Store(true)
	if !in.dead() {
		ctx, cancel := context.WithTimeout(in.ctx, p.cfg.HangGrace)
		_ = chromedp.Cancel(ctx)
		cancel()
	}
	in.cancel()
	in.allocEnd() // kills what is left and waits for it
}

// kill ends a hung browser at once. It takes no more pages; the last one to finish closes it.
func (p *Pool) kill(in *instance) {
	in.killedByPool.Store(true)
	p.mu.Lock()
	if in.retiring == "" {
		in.retiring = "hung"
	}
	p.mu.Unlock()
	if err := killProcess(in.pid); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Error("kill hung browser", "pid", in.pid, "err", err)
	}
}

// launch starts one Chromium, with its flags, and a watcher that retires it when it dies.
func (p *Pool) launch(ctx context.Context) (*instance, error) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(p.execPath),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		// Chromium's sandbox does not start as root (a container's usual user); elsewhere keep it.
		chromedp.Flag("no-sandbox", os.Geteuid() == 0),
		chromedp.Flag("disable-gpu", true),
		// /dev/shm is 64 MB in a default container; Chromium crashes when it fills.
		chromedp.Flag("disable-dev-shm-usage", true),
		// Every connection through the guard proxy, loopback included (Chromium bypasses
		// the proxy for loopback unless told not to).
		chromedp.Flag("proxy-server", "http://"+p.proxy.addr()),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// UDP (WebRTC) cannot go through the proxy: allow none.
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		// No traffic of Chromium's own: updates, sync, safe browsing, metrics, discovery.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("disable-component-extensions-with-background-pages", true),
		chromedp.Flag("no-service-autorun", true),
		chromedp.Flag("disable-field-trial-config", true),
		chromedp.Flag("disable-search-engine-choice-screen", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,DialMediaRouteProvider,OptimizationHints,OptimizationGuideModelDownloading,OptimizationHintsFetching,OptimizationTargetPrediction,AutofillServerCommunication,CertificateTransparencyComponentUpdater,NetworkTimeServiceQuerying,SafeBrowsing,DnsOverHttps,InterestFeedContentSuggestions,GlobalMediaControls,LensOverlay,AcceptCHFrame"),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.WindowSize(1280, 900),
	}
	if p.cfg.UserAgent != "" {
		opts = append(opts, chromedp.UserAgent(p.cfg.UserAgent))
	}
	// The browser's lifetime is the pool's, not the caller's: its contexts hang off Background.
	allocCtx, allocEnd := chromedp.NewExecAllocator(context.Background(), opts...)
	logf := func(format string, args ...any) { p.log.Debug("chromedp: " + fmt.Sprintf(format, args...)) }
	bctx, bcancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	var err error
	select {
	case err = <-started:
	case <-time.After(p.cfg.LaunchTimeout):
		err = fmt.Errorf("no answer after %s", p.cfg.LaunchTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		bcancel()
		allocEnd()
		return nil, fmt.Errorf("start chromium %s: %w", p.execPath, err)
	}
	c := chromedp.FromContext(bctx)
	proc := c.Browser.Process()
	if proc == nil {
		bcancel()
		allocEnd()
		return nil, fmt.Errorf("start chromium %s: no process", p.execPath)
	}
	p.mu.Lock()
	p.nextID++
	in := &instance{id: p.nextID, pid: proc.Pid, ctx: bctx, cancel: bcancel, allocEnd: allocEnd, lost: c.Browser.LostConnection}
	p.stats.Launches++
	p.stats.BrowserPIDsSeen++
	p.wg.Add(1)
	p.mu.Unlock()
	go p.watch(in)
	p.log.Info("browser started", "browser", in.id, "pid", in.pid, "exec", p.execPath)
	return in, nil
}

// watch retires a browser whose connection drops without the pool having closed it: a crash.
func (p *Pool) watch(in *instance) {
	defer p.wg.Done()
	<-in.lost
	p.mu.Lock()
	defer p.mu.Unlock()
	if !in.killedByPool.Load() {
		p.stats.Crashes++
		p.log.Error("browser crashed", "browser", in.id, "pid", in.pid, "pages_rendering", in.active)
	}
	if in.retiring == "" {
		in.retiring = "crashed"
	}
	if in.active == 0 && !in.closing {
		p.startClose(in)
	}
	p.notify()
}

// Close stops every browser and the guard proxy, and waits for them. Renders in flight fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, in := range p.insts {
		if !in.closing {
			in.retiring = "pool closed"
			p.startClose(in)
		}
	}
	p.notify()
	p.mu.Unlock()
	p.wg.Wait()
	p.proxy.close()
	p.mu.Lock()
	vias := p.vias
	p.vias = map[*proxy.Proxy]*guardProxy{}
	p.mu.Unlock()
	for _, g := range vias {
		g.close()
	}
	return nil
}

// WaitKind is what a page waits for after it loads.
type WaitKind int

const (
	WaitLoad        WaitKind = iota // the load event (the default)
	WaitSelector                    // an element matching a CSS selector
	WaitNetworkIdle                 // no request for 500 ms (Chromium's networkIdle)
	WaitDuration                    // a fixed time
)

// Wait is a parsed wait_for.
type Wait struct {
	Kind     WaitKind
	Selector string
	Duration time.Duration
}

// ParseWait reads a wait_for value: "" (the load event), "networkidle", a Go duration ("2s",
// "500ms"), or a CSS selector. A selector that does not parse is an error naming it.
func ParseWait(s string) (Wait, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Wait{Kind: WaitLoad}, nil
	case strings.EqualFold(s, "networkidle"):
		return Wait{Kind: WaitNetworkIdle}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return Wait{}, fmt.Errorf("wait_for %q: a duration must be positive", s)
		}
		return Wait{Kind: WaitDuration, Duration: d}, nil
	}
	if _, err := cascadia.Compile(s); err != nil {
		return Wait{}, fmt.Errorf("wait_for %q: not networkidle, a duration (2s) or a CSS selector: %v", s, err)
	}
	return Wait{Kind: WaitSelector, Selector: s}, nil
}

// resourceTypes maps the names Request.BlockResources takes to Chromium's resource types.
var resourceTypes = map[string]network.ResourceType{
	"image":      network.ResourceTypeImage,
	"font":       network.ResourceTypeFont,
	"media":      network.ResourceTypeMedia,
	"stylesheet": network.ResourceTypeStylesheet,
}

// DefaultBlocked are the resource types a Request blocks when BlockResources is nil.
var DefaultBlocked = []string{"image", "font", "media"}

// Request is one page to render.
type Request struct {
	URL string
	// WaitFor: "" (load event), "networkidle", a duration, or a CSS selector (see ParseWait).
	WaitFor string
	// Timeout bounds the whole render. Default Config.PageTimeout.
	Timeout time.Duration
	// BlockResources lists resource types not fetched: image, font, media, stylesheet.
	// nil blocks DefaultBlocked; an empty non-nil slice blocks nothing.
	BlockResources []string
	// ScrollToBottom scrolls until the page stops growing (lazy lists), before WaitFor.
	ScrollToBottom bool
	// ScreenshotOnFailure keeps a PNG of the page in the Result of a failed render.
	ScreenshotOnFailure bool
	// Proxy, when set, is the upstream proxy the page's connections go through (upstream.go).
	// A page that fails because the proxy did returns its error (proxy.ErrProxy).
	Proxy *proxy.Proxy
	// Cookies are put in the page's browser context before it loads (a session's cookie jar),
	// each as if set by a response from its URL, which its domain and path default to.
	Cookies []Cookie
}

// Cookie is a cookie as a response from URL set it.
type Cookie struct {
	URL    string
	Cookie *http.Cookie
}

// Result is a rendered page. A failed render may return one too, with what was seen
// (Screenshot, partial HTML) for the operator.
type Result struct {
	URL        string      // the document's URL after redirects and scripts
	Status     int         // the document's HTTP status
	Header     http.Header // the document's response headers
	HTML       string      // the rendered DOM, serialized
	Screenshot []byte      // PNG, on failure when asked
	Blocked    int         // requests of blocked resource types
	Refused    []string    // URLs of requests the address guard refused
	// Cookies are the cookies the page's browser context holds once it is read: those of
	// Request.Cookies, and those the page set (its responses' Set-Cookie, its scripts), with
	// their domain, path, expiry and flags. Domain starts with "." for a domain cookie.
	Cookies []*http.Cookie
}

// checkURL applies the address guard to a request URL as far as it can without resolving
// names: IP literals and localhost. Names are judged at connect time by the guard proxy.
func (p *Pool) checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", fetch.ErrInvalidURL, err)
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return fmt.Errorf("%w: %q", fetch.ErrScheme, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: no host in %q", fetch.ErrInvalidURL, raw)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return fetch.CheckAddr(addr, p.cfg.AllowLoopback, p.cfg.AllowPrivate)
	}
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fetch.CheckAddr(netip.AddrFrom4([4]byte{127, 0, 0, 1}), p.cfg.AllowLoopback, p.cfg.AllowPrivate)
	}
	return nil
}

// checkTarget judges the page's own URL before any navigation, resolving its name.
func (p *Pool) checkTarget(ctx context.Context, raw string) error {
	if err := p.checkURL(raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil || p.cfg.AllowPrivate {
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if err := fetch.CheckAddr(a, p.cfg.AllowLoopback, p.cfg.AllowPrivate); err != nil {
			return err
		}
	}
	return nil
}

// Render loads req.URL in a fresh tab (its own browser context: no cookies or cache shared
// with other pages), waits as asked and returns the rendered DOM. Errors: a *fetch.RefusedError
// (fetch.ErrForbiddenAddress) for a URL the guard refuses, before any navigation;
// fetch.ErrTimeout wrapped when the page's timeout passed; ErrBrowserCrashed when Chromium died
// under the page; a *fetch.StatusError with the Result for a document status >= 400; the
// caller's ctx error when it was cancelled.
func (p *Pool) Render(ctx context.Context, req Request) (*Result, error) {
	wait, err := ParseWait(req.WaitFor)
	if err != nil {
		return nil, err
	}
	blocked := map[network.ResourceType]bool{}
	names := req.BlockResources
	if names == nil {
		names = DefaultBlocked
	}
	for _, n := range names {
		rt, ok := resourceTypes[strings.ToLower(n)]
		if !ok {
			return nil, fmt.Errorf("block_resources: unknown resource type %q (image, font, media, stylesheet)", n)
		}
		blocked[rt] = true
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = p.cfg.PageTimeout
	}
	if err := p.checkTarget(ctx, req.URL); err != nil {
		return nil, fmt.Errorf("render %s: %w", req.URL, err)
	}
	in, err := p.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", req.URL, err)
	}
	defer p.release(in)
	p.mu.Lock()
	p.stats.Renders++
	p.mu.Unlock()
	var up *guardProxy
	var upFailures int64
	if req.Proxy != nil {
		if up, err = p.via(req.Proxy); err != nil {
			return nil, fmt.Errorf("render %s: %w", req.URL, err)
		}
		upFailures = up.failures.Load()
	}
	res, err := p.render(ctx, in, req, up, wait, blocked, timeout)
	if perr := proxyBlame(up, upFailures, res, err); perr != nil {
		err = fmt.Errorf("%w (page: %v)", perr, err)
	}
	if err != nil {
		err = fmt.Errorf("render %s: %w", req.URL, err)
	}
	return res, err
}

// pageState is what a tab's event listener gathers; guarded by mu.
type pageState struct {
	mu      sync.Mutex
	frameID cdp.FrameID
	inited  bool
	idle    chan struct{}
	idleSet bool
	blocked int
	refused []string
	// The page's requests in flight and the last change, for ScrollToBottom's quiet wait.
	inflight map[network.RequestID]bool
	sinceNet clock.Stopwatch // since the last change
	netEvent chan struct{}   // closed and replaced on each change
}

// netChanged records network activity. Call with mu held.
func (st *pageState) netChanged() {
	st.sinceNet = clock.StartStopwatch()
	close(st.netEvent)
	st.netEvent = make(chan struct{})
}

// waitQuiet waits until the page has had no request in flight for quiet, counted from its
// last request or from now, whichever is later.
func (st *pageState) waitQuiet(ctx context.Context, quiet time.Duration) error {
	st.mu.Lock()
	st.netChanged()
	st.mu.Unlock()
	for {
		st.mu.Lock()
		busy, left, ch := len(st.inflight) > 0, quiet-st.sinceNet.Elapsed(), st.netEvent
		st.mu.Unlock()
		if !busy && left <= 0 {
			return nil
		}
		var timeout <-chan time.Time
		if !busy {
			t := time.NewTimer(left)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-timeout:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *Pool) render(ctx context.Context, in *instance, req Request, up *guardProxy, wait Wait, blocked map[network.ResourceType]bool, timeout time.Duration) (*Result, error) {
	st := &pageState{idle: make(chan struct{}), inflight: map[network.RequestID]bool{}, netEvent: make(chan struct{})}
	mine := map[string]bool{} // guarded by p.askedMu
	defer p.dropAsks(mine)
	var tgt atomic.Pointer[chromedp.Target]
	paused := make(chan *cdpfetch.EventRequestPaused, 64)
	tabDone := make(chan struct{}) // closed when the tab is closed
	rendererCrashed := make(chan struct{})
	var crashOnce sync.Once
	defer close(tabDone)
	listener := func(ev any) {
		// Runs in the tab's read loop: no commands here, hand over and return.
		switch e := ev.(type) {
		case *cdpfetch.EventRequestPaused:
			select {
			case paused <- e:
			default:
				go func() {
					select {
					case paused <- e:
					case <-tabDone:
					}
				}()
			}
		case *network.EventRequestWillBeSent:
			st.mu.Lock()
			st.inflight[e.RequestID] = true
			st.netChanged()
			st.mu.Unlock()
		case *network.EventLoadingFinished:
			st.mu.Lock()
			delete(st.inflight, e.RequestID)
			st.netChanged()
			st.mu.Unlock()
		case *network.EventLoadingFailed:
			st.mu.Lock()
			delete(st.inflight, e.RequestID)
			st.netChanged()
			st.mu.Unlock()
		case *inspector.EventTargetCrashed:
			crashOnce.Do(func() { close(rendererCrashed) })
		case *network.EventWebSocketCreated:
			if hp, ok := hostPort(e.URL); ok && p.checkURL(e.URL) == nil {
				p.ask(mine, hp)
			}
		case *page.EventLifecycleEvent:
			st.mu.Lock()
			if e.FrameID == st.frameID {
				switch e.Name {
				case "init":
					st.inited = true
				case "networkIdle":
					if st.inited && !st.idleSet {
						st.idleSet = true
						close(st.idle)
					}
				}
			}
			st.mu.Unlock()
		}
	}
	var ctxOpts []chromedp.CreateBrowserContextOption
	if up != nil {
		ctxOpts = append(ctxOpts, func(cp *target.CreateBrowserContextParams) {
			cp.ProxyServer = "http://" + up.addr()
			cp.ProxyBypassList = "<-loopback>"
		})
	}
	tabCtx, tabCancel := chromedp.NewContext(in.ctx, chromedp.WithNewBrowserContext(ctxOpts...), chromedp.WithListener(listener))
	defer func() {
		// Closing the tab disposes of its browser context; bounded by chromedp's own timeout.
		closeCtx, cancel := context.WithTimeout(context.Background(), p.cfg.HangGrace)
		defer cancel()
		done := make(chan struct{})
		go func() { _ = chromedp.Cancel(tabCtx); close(done) }()
		select {
		case <-done:
		case <-closeCtx.Done():
			tabCancel()
		}
	}()
	runCtx, cancel := context.WithTimeout(tabCtx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	// settled closes when the page's steps have returned, as finish begins: what finish then
	// does in the tab (a failed page's screenshot) is not cut short.
	settled := make(chan struct{})
	go func() {
		select {
		case <-rendererCrashed:
			cancel() // nothing the tab waits for will come
			// chromedp's event loop may be inside a call to the dead renderer (DOM.getDocument
			// after a documentUpdated) while it holds the tab's frame lock, and that call waits on
			// the tab's context, not ours: a query of the page would then wait on the lock for
			// good. Ending the tab ends the call. The browser lives on.
			tabCancel()
		case <-runCtx.Done():
			if !errors.Is(runCtx.Err(), context.DeadlineExceeded) {
				return
			}
			// Past the page's timeout, a query stuck the same way on a page that stopped
			// answering is given HangGrace to return before its tab is ended too.
			t := time.NewTimer(p.cfg.HangGrace)
			defer t.Stop()
			select {
			case <-settled:
			case <-t.C:
				tabCancel()
			}
		}
	}()

	// Answer each paused request off the read loop.
	handlerDone := make(chan struct{})
	defer func() { <-handlerDone }()
	defer cancel()
	go func() {
		defer close(handlerDone)
		for {
			select {
			case <-runCtx.Done():
				return
			case e := <-paused:
				t := tgt.Load()
				if t == nil {
					continue
				}
				var err error
				switch {
				case blocked[e.ResourceType]:
					st.mu.Lock()
					st.blocked++
					st.mu.Unlock()
					_, err = cdp.Call(runCtx, t, cdpfetch.FailRequest, cdpfetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
				case p.checkURL(e.Request.URL) != nil:
					gerr := p.checkURL(e.Request.URL)
					p.log.Warn("browser request refused", "page", req.URL, "url", e.Request.URL, "err", gerr)
					st.mu.Lock()
					st.refused = append(st.refused, e.Request.URL)
					st.mu.Unlock()
					p.mu.Lock()
					p.stats.Refused++
					p.mu.Unlock()
					_, err = cdp.Call(runCtx, t, cdpfetch.FailRequest, cdpfetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonAddressUnreachable})
				default:
					if hp, ok := hostPort(e.Request.URL); ok {
						p.ask(mine, hp)
					}
					_, err = cdp.Call(runCtx, t, cdpfetch.ContinueRequest, cdpfetch.ContinueRequestParams{RequestID: e.RequestID})
				}
				if err != nil && runCtx.Err() == nil {
					p.log.Debug("answer paused request", "url", e.Request.URL, "err", err)
				}
			}
		}
	}()

	res := &Result{}
	finish := func(err error) (*Result, error) { // every return of the steps below goes through it, once
		close(settled)
		st.mu.Lock()
		res.Blocked, res.Refused = st.blocked, append([]string(nil), st.refused...)
		st.mu.Unlock()
		p.mu.Lock()
		p.stats.Blocked += int64(res.Blocked)
		p.mu.Unlock()
		if err == nil {
			return res, nil
		}
		select {
		case <-rendererCrashed:
			p.mu.Lock()
			p.stats.RendererCrashes++
			p.mu.Unlock()
			p.log.Warn("page renderer crashed", "browser", in.id, "page", req.URL)
			return res, fmt.Errorf("%w: %v", ErrRendererCrashed, err)
		default:
		}
		switch {
		case p.isClosed():
			return res, fmt.Errorf("%w: %v", ErrClosed, err)
		case in.dead() && runCtx.Err() != context.DeadlineExceeded && ctx.Err() == nil:
			return res, fmt.Errorf("%w (pid %d): %v", ErrBrowserCrashed, in.pid, err)
		case ctx.Err() != nil:
			return res, ctx.Err()
		case errors.Is(runCtx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("%w: page not rendered within %s: %v", fetch.ErrTimeout, timeout, err)
			if !p.answers(in) {
				p.mu.Lock()
				p.stats.HungKilled++
				p.mu.Unlock()
				p.log.Error("browser hung: killed", "browser", in.id, "pid", in.pid, "page", req.URL)
				p.kill(in)
				return res, fmt.Errorf("%w; the browser did not answer within %s and was killed", err, p.cfg.HangGrace)
			}
		}
		if req.ScreenshotOnFailure && !in.dead() {
			shotCtx, c := context.WithTimeout(tabCtx, p.cfg.HangGrace)
			if png, serr := chromedp.Run(shotCtx, chromedp.CaptureScreenshot()); serr == nil {
				res.Screenshot = png
			} else {
				p.log.Warn("screenshot of a failed page", "page", req.URL, "err", serr)
			}
			if html, herr := chromedp.Run(shotCtx, chromedp.Evaluate[string](htmlJS)); herr == nil && res.HTML == "" {
				res.HTML = html
			} else if herr != nil {
				p.log.Warn("HTML of a failed page", "page", req.URL, "err", herr)
			}
			c()
		}
		return res, err
	}

	// Open the tab, then interception and lifecycle events before navigating.
	// The tab's event loop lives as long as the context of its first Do: tabCtx, so that a
	// failed page can still be captured after runCtx has ended.
	opened := make(chan error, 1)
	go func() { opened <- chromedp.Do(tabCtx) }()
	select {
	case err := <-opened:
		if err != nil {
			return finish(fmt.Errorf("open tab: %w", err))
		}
	case <-runCtx.Done():
		tabCancel()
		<-opened
		return finish(fmt.Errorf("open tab: %w", runCtx.Err()))
	}
	t := chromedp.FromContext(runCtx).Target
	tgt.Store(t)
	st.mu.Lock()
	st.frameID = cdp.FrameID(t.TargetID)
	st.mu.Unlock()
	setup := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := cdp.Call(ctx, t, cdpfetch.Enable, cdpfetch.EnableParams{
			Patterns: []*cdpfetch.RequestPattern{{URLPattern: "*", RequestStage: cdpfetch.RequestStageRequest}},
		}); err != nil {
			return fmt.Errorf("enable request interception: %w", err)
		}
		if _, err := cdp.Call(ctx, t, page.SetLifecycleEventsEnabled, page.SetLifecycleEventsEnabledParams{Enabled: true}); err != nil {
			return fmt.Errorf("enable lifecycle events: %w", err)
		}
		return nil
	})
	if err := chromedp.Do(runCtx, setup); err != nil {
		return finish(err)
	}
	if err := setCookies(runCtx, req.Cookies); err != nil {
		return finish(err)
	}
	resp, err := chromedp.RunResponse(runCtx, chromedp.Navigate(req.URL))
	if err != nil {
		// A navigation that fails after the guard refused a request was refused itself: its URL
		// or a redirect's (a refused subresource does not fail the navigation).
		st.mu.Lock()
		var first string
		if len(st.refused) > 0 {
			first = st.refused[0]
		}
		st.mu.Unlock()
		if first != "" {
			return finish(fmt.Errorf("navigate: %s: %w", first, p.checkURL(first)))
		}
		return finish(fmt.Errorf("navigate: %w", err))
	}
	if resp != nil {
		res.Status = int(resp.Status)
		res.Header = http.Header{}
		for k, v := range resp.Headers {
			if s, ok := v.(string); ok {
				for _, line := range strings.Split(s, "\n") {
					res.Header.Add(k, line)
				}
			}
		}
	}
	if req.ScrollToBottom {
		if err := scrollToBottom(runCtx, st); err != nil {
			return finish(fmt.Errorf("scroll to bottom: %w", err))
		}
	}
	switch wait.Kind {
	case WaitSelector:
		if err := chromedp.Do(runCtx, chromedp.WaitReady(chromedp.CSS(wait.Selector))); err != nil {
			return finish(fmt.Errorf("wait for %q: %w", wait.Selector, err))
		}
	case WaitNetworkIdle:
		select {
		case <-st.idle:
		case <-runCtx.Done():
			return finish(fmt.Errorf("wait for network idle: %w", runCtx.Err()))
		}
	case WaitDuration:
		t := time.NewTimer(wait.Duration)
		select {
		case <-t.C:
		case <-runCtx.Done():
			t.Stop()
			return finish(fmt.Errorf("wait %s: %w", wait.Duration, runCtx.Err()))
		}
	}
	loc, err := chromedp.Run(runCtx, chromedp.Location())
	if err != nil {
		return finish(fmt.Errorf("read location: %w", err))
	}
	res.URL = loc
	html, err := chromedp.Run(runCtx, chromedp.Evaluate[string](htmlJS))
	if err != nil {
		return finish(fmt.Errorf("read the DOM: %w", err))
	}
	res.HTML = html
	if res.Cookies, err = contextCookies(runCtx); err != nil {
		return finish(err)
	}
	if res.Status >= 400 {
		return finish(&fetch.StatusError{Code: res.Status}) // with its screenshot when asked: an error page shows why
	}
	return finish(nil)
}

// setCookies puts cs in the browser context of the tab of ctx.
func setCookies(ctx context.Context, cs []Cookie) error {
	if len(cs) == 0 {
		return nil
	}
	params := make([]*network.CookieParam, 0, len(cs))
	for _, c := range cs {
		cp := &network.CookieParam{Name: c.Cookie.Name, Value: c.Cookie.Value, URL: c.URL, Domain: c.Cookie.Domain,
			Path: c.Cookie.Path, Secure: c.Cookie.Secure, HTTPOnly: c.Cookie.HttpOnly}
		if !c.Cookie.Expires.IsZero() {
			cp.Expires = cdp.TimeSinceEpoch(float64(c.Cookie.Expires.UnixNano()) / float64(time.Second))
		}
		params = append(params, cp)
	}
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetCookies, network.SetCookiesParams{Cookies: params})
		return err
	}))
	if err != nil {
		return fmt.Errorf("set the session's cookies: %w", err)
	}
	return nil
}

// contextCookies returns every cookie of the browser context of the tab of ctx, asked of the
// browser (a tab's session answers Storage.getCookies with none).
func contextCookies(ctx context.Context) ([]*http.Cookie, error) {
	c := chromedp.FromContext(ctx)
	r, err := cdp.Call(ctx, c.Browser, storage.GetCookies, storage.GetCookiesParams{BrowserContextID: c.BrowserContextID})
	if err != nil {
		return nil, fmt.Errorf("read the page's cookies: %w", err)
	}
	got := r.Cookies
	out := make([]*http.Cookie, len(got))
	for i, c := range got {
		hc := &http.Cookie{Name: c.Name, Value: c.Value, Domain: c.Domain, Path: c.Path, Secure: c.Secure, HttpOnly: c.HTTPOnly}
		if !c.Session && c.Expires > 0 {
			hc.Expires = time.Unix(0, int64(c.Expires*float64(time.Second)))
		}
		switch c.SameSite {
		case network.CookieSameSiteStrict:
			hc.SameSite = http.SameSiteStrictMode
		case network.CookieSameSiteLax:
			hc.SameSite = http.SameSiteLaxMode
		case network.CookieSameSiteNone:
			hc.SameSite = http.SameSiteNoneMode
		}
		out[i] = hc
	}
	return out, nil
}

// answers reports whether a browser answers a command within HangGrace.
func (p *Pool) answers(in *instance) bool {
	if in.dead() {
		return false
	}
	ctx, cancel := context.WithTimeout(in.ctx, p.cfg.HangGrace)
	defer cancel()
	_, err := chromedp.Targets(ctx)
	return err == nil
}

// htmlJS serializes the rendered document with its doctype.
const htmlJS = `(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + "\n" : "") + document.documentElement.outerHTML`

// heightJS is the page's scrollable height.
const heightJS = `Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)`

// scrollQuiet is how long a page must make no request after a scroll before its height is read:
// a lazy list asks for more within a few frames of its end coming into view, and a request in
// flight is waited for however long it takes (up to the page's timeout), so a slow server does
// not end the list early.
const scrollQuiet = 500 * time.Millisecond

// maxScrolls bounds the scrolls of an endless list.
const maxScrolls = 50

// scrollToBottom scrolls to the end until a scroll no longer makes the page taller.
func scrollToBottom(ctx context.Context, st *pageState) error {
	for range maxScrolls {
		h0, err := chromedp.Run(ctx, chromedp.Evaluate[float64](heightJS))
		if err != nil {
			return err
		}
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, `+heightJS+`)`)); err != nil {
			return err
		}
		if err := st.waitQuiet(ctx, scrollQuiet); err != nil {
			return err
		}
		h1, err := chromedp.Run(ctx, chromedp.Evaluate[float64](heightJS))
		if err != nil {
			return err
		}
		if h1 <= h0 {
			return nil
		}
	}
	return nil
}
