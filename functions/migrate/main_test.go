package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/db"
	"crawlq/internal/dbsetup"
	"crawlq/internal/envconfig"
)

// freshDB creates an empty database on the local server and returns its URL.
func freshDB(t *testing.T) *url.URL {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Fatal("DATABASE_URL is not set: run with `make test` (or scripts/localpg.sh start)")
	}
	ctx := context.Background()
	root, err := db.Open(ctx, db.Config{URL: base, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	name := fmt.Sprintf("migrate_fn_%d", time.Now().UnixNano())
	if _, err := root.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r, err := db.Open(context.Background(), db.Config{URL: base, MaxConns: 1}); err == nil {
			_, _ = r.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
			r.Close()
		}
	})
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u
}

// refusingProxy is a TCP proxy on a loopback port that refuses connections (nothing listens)
// until up is called, then forwards each connection to target.
type refusingProxy struct {
	addr, target string
	mu           sync.Mutex
	l            net.Listener
	upAt         time.Time
}

func newRefusingProxy(t *testing.T, target string) *refusingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &refusingProxy{addr: l.Addr().String(), target: target}
	l.Close() // the port is free again: a connection to it is refused
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.l != nil {
			p.l.Close()
		}
	})
	return p
}

func (p *refusingProxy) up(t *testing.T) {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Errorf("proxy listen on %s: %v", p.addr, err)
		return
	}
	p.mu.Lock()
	p.l, p.upAt = l, time.Now()
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", p.target)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { _, _ = io.Copy(s, c); s.Close() }()
				_, _ = io.Copy(c, s)
			}()
		}
	}()
}

func (p *refusingProxy) wentUp() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upAt
}

// opener opens the database through the proxy as the migrate function does (envconfig.DBSetup),
// counting attempts.
func opener(u *url.URL, proxyAddr string, attempts *atomic.Int32) func(context.Context) (dbsetup.Config, error) {
	via := *u
	via.Host = proxyAddr
	env := map[string]string{"DATABASE_URL": via.String()}
	return func(ctx context.Context) (dbsetup.Config, error) {
		attempts.Add(1)
		return envconfig.DBSetup(ctx, envconfig.Map(env), aws.Config{})
	}
}

// TestMigrateWaitsForTheProxy: the first apply invokes migrate while the proxy still refuses
// connections; the function retries with backoff and migrates once the proxy is up, in the
// same invocation (it used to log.Fatalf on the first refused connection). The proxy refuses
// for the first 20 s of real time (issue 32), against the function's own deploy settings
// (deployRetry: 1 s doubling to 10 s), so the test takes about 20-25 s.
func TestMigrateWaitsForTheProxy(t *testing.T) {
	t.Parallel()
	u := freshDB(t)
	p := newRefusingProxy(t, u.Host)
	// Control: what the function did before (one envconfig.DBSetup at init, log.Fatalf on its
	// error) fails against the refusing proxy.
	var control atomic.Int32
	if _, err := opener(u, p.addr, &control)(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("control: a single connect through the refusing proxy: %v, want connection refused", err)
	}
	const refuseFor = 20 * time.Second
	timer := time.AfterFunc(refuseFor, func() { p.up(t) })
	defer timer.Stop()

	var attempts atomic.Int32
	var logs strings.Builder
	var logMu sync.Mutex
	m := &migrator{
		open:   opener(u, p.addr, &attempts),
		retry:  deployRetry,
		logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil)),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := m.handle(ctx, []byte(`{"source":"deploy"}`))
	if err != nil {
		t.Fatalf("migrate through a proxy that refused for %s: %v", refuseFor, err)
	}
	if len(res.Applied) == 0 {
		t.Errorf("migrate applied nothing on a fresh database: %+v", res)
	}
	if p.wentUp().IsZero() {
		t.Fatal("migrate succeeded before the proxy listened")
	}
	if n := attempts.Load(); n < 2 {
		t.Errorf("%d connection attempts; the refused ones were not retried", n)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "database not reachable yet; retrying") || !strings.Contains(logs.String(), "connected to the database") {
		t.Errorf("the wait does not show in the log:\n%s", logs.String())
	}
	// A warm invocation reuses the connection.
	before := attempts.Load()
	if _, err := m.handle(ctx, nil); err != nil || attempts.Load() != before {
		t.Errorf("second invocation: %v (attempts %d, then %d)", err, before, attempts.Load())
	}
}

// TestMigrateGivesUp: a proxy that never comes up fails the invocation after the bounded wait,
// with a message that says what happened.
func TestMigrateGivesUp(t *testing.T) {
	t.Parallel()
	u := freshDB(t)
	p := newRefusingProxy(t, u.Host)
	var attempts atomic.Int32
	m := &migrator{
		open:   opener(u, p.addr, &attempts),
		retry:  retry{Within: 2 * time.Second, First: 200 * time.Millisecond, Max: 400 * time.Millisecond},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	_, err := m.handle(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "gave up after") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want a give-up naming the refused connection", err)
	}
	if n := attempts.Load(); n < 3 {
		t.Errorf("%d attempts within 2s at 200-400ms backoff", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
