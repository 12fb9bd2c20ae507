package browser

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
)

// guardProxy is a loopback HTTP proxy inside the crawlq process that every connection of the
// pool's Chromium goes through (--proxy-server, loopback not bypassed). Its dialer carries the
// fetcher's address guard, judged on the resolved address at connect time, so what request
// interception cannot see is still refused: a WebSocket, a service worker's fetch, a name whose
// DNS answer changes between our check and Chromium's connection (rebinding).
type guardProxy struct {
	ln     net.Listener
	srv    *http.Server
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	admit  func(ctx context.Context, hostport string) bool
	rp     *httputil.ReverseProxy
	log    *slog.Logger
	wg     sync.WaitGroup
	connMu sync.Mutex
	conns  map[net.Conn]struct{}

	// Failures of the upstream proxy this guard proxy goes through (upstream.go), and the last.
	failures atomic.Int64
	lastErr  atomic.Pointer[error]
}

func newGuardProxy(dial func(ctx context.Context, network, addr string) (net.Conn, error), admit func(ctx context.Context, hostport string) bool, log *slog.Logger) (*guardProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &guardProxy{ln: ln, dial: dial, admit: admit, log: log, conns: map[net.Conn]struct{}{}}
	transport := &http.Transport{
		Proxy:                 nil, // an outer proxy would dial for us and skip the guard
		DialContext:           dial,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		// The request is in proxy form (absolute URL): forward it as it is, without
		// X-Forwarded-For (Rewrite adds none unless asked).
		Rewrite:   func(*httputil.ProxyRequest) {},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.refusedOrFailed(w, r.URL.Host, err)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

func (p *guardProxy) addr() string { return p.ln.Addr().String() }

func (p *guardProxy) refusedOrFailed(w http.ResponseWriter, host string, err error) {
	if errors.Is(err, proxy.ErrProxy) {
		p.lastErr.Store(&err)
		p.failures.Add(1)
		p.log.Warn("browser request: its proxy failed", "host", host, "err", err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if errors.Is(err, fetch.ErrForbiddenAddress) {
		p.log.Warn("browser request refused", "host", host, "err", err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, err.Error(), http.StatusBadGateway)
}

func (p *guardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hostport := r.Host
	if r.Method != http.MethodConnect {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		hostport = r.URL.Host
		if r.URL.Port() == "" {
			hostport = net.JoinHostPort(r.URL.Hostname(), "80")
		}
	}
	if p.admit != nil && !p.admit(r.Context(), hostport) {
		// Chromium's own traffic (updates, sign-in), or a request no page made.
		p.log.Debug("browser connection no page asked for refused", "host", hostport)
		http.Error(w, "no page asked for "+hostport, http.StatusForbidden)
		return
	}
	if r.Method != http.MethodConnect {
		p.rp.ServeHTTP(w, r)
		return
	}
	// CONNECT host:port: https and WebSockets tunnel through here.
	up, err := p.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		p.refusedOrFailed(w, r.Host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	p.track(up, down)
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		// Bytes the client sent after the CONNECT line that the server already buffered.
		if n := buf.Reader.Buffered(); n > 0 {
			b, _ := buf.Reader.Peek(n)
			_, _ = up.Write(b)
		}
		_, _ = io.Copy(up, down)
		closeWrite(up)
	}()
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
		p.untrack(up, down)
	}()
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

func (p *guardProxy) track(cs ...net.Conn) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *guardProxy) untrack(cs ...net.Conn) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// close stops the proxy and its tunnels and waits for their goroutines.
func (p *guardProxy) close() {
	_ = p.srv.Close()
	p.connMu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.connMu.Unlock()
	if t, ok := p.rp.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	p.wg.Wait()
}
