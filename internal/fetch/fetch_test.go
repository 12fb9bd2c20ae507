package fetch

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// newFetcher builds a fetcher for the loopback test servers: AllowLoopback is set, since the
// default refuses them.
func newFetcher(t testing.TB, cfg Config) *Fetcher {
	t.Helper()
	cfg.AllowLoopback = true
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(f.Close)
	return f
}

func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for field, cfg := range map[string]Config{
		"ConnectTimeout":      {ConnectTimeout: -1},
		"ReadTimeout":         {ReadTimeout: -time.Second},
		"MaxBodyBytes":        {MaxBodyBytes: -5},
		"MaxRedirects":        {MaxRedirects: -1},
		"MaxIdleConnsPerHost": {MaxIdleConnsPerHost: -1},
		"UserAgent":           {UserAgent: "x\r\nEvil: 1"},
	} {
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", cfg, err, field)
		}
	}
	if _, err := New(Config{}); err != nil {
		t.Fatalf("New(zero Config) = %v, want defaults", err)
	}
}

func TestFetchOK(t *testing.T) {
	t.Parallel()
	var gotUA atomic.Value
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUA.Store(r.UserAgent())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><body>héllo</body></html>")
	}))
	f := newFetcher(t, Config{})
	res, err := f.Fetch(context.Background(), srv.URL+"/page")
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if res.Status != 200 || res.URL != srv.URL+"/page" || res.Redirects != 0 {
		t.Errorf("got status %d url %s redirects %d", res.Status, res.URL, res.Redirects)
	}
	if string(res.Body) != "<html><body>héllo</body></html>" {
		t.Errorf("body = %q", res.Body)
	}
	if res.ContentType != "text/html" {
		t.Errorf("ContentType = %q, want text/html", res.ContentType)
	}
	if res.Bytes != int64(len(res.Body)) {
		t.Errorf("Bytes = %d, want %d", res.Bytes, len(res.Body))
	}
	if ua := gotUA.Load(); ua != "crawlq/1.0" {
		t.Errorf("server saw User-Agent %q, want crawlq/1.0", ua)
	}
	if res.Elapsed <= 0 {
		t.Errorf("Elapsed = %s, want > 0", res.Elapsed)
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/mid", http.StatusFound) })
	mux.HandleFunc("/mid", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/end", http.StatusMovedPermanently) })
	mux.HandleFunc("/end", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "end") })
	mux.HandleFunc("/chain/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/chain/"))
		if n == 0 {
			fmt.Fprint(w, "done")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/loop/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop/b", http.StatusFound) })
	mux.HandleFunc("/loop/b", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop/a", http.StatusFound) })
	mux.HandleFunc("/ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://example.com/file", http.StatusFound)
	})
	srv := serve(t, mux)
	f := newFetcher(t, Config{MaxRedirects: 3})
	ctx := context.Background()

	t.Run("followed", func(t *testing.T) {
		res, err := f.Fetch(ctx, srv.URL+"/start")
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		if res.URL != srv.URL+"/end" || res.Redirects != 2 || string(res.Body) != "end" {
			t.Errorf("got url %s redirects %d body %q", res.URL, res.Redirects, res.Body)
		}
	})
	t.Run("at limit", func(t *testing.T) {
		res, err := f.Fetch(ctx, srv.URL+"/chain/3")
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		if res.Redirects != 3 || string(res.Body) != "done" {
			t.Errorf("got redirects %d body %q", res.Redirects, res.Body)
		}
	})
	t.Run("over limit", func(t *testing.T) {
		res, err := f.Fetch(ctx, srv.URL+"/chain/4")
		if !errors.Is(err, ErrTooManyRedirects) || res != nil {
			t.Fatalf("Fetch = %v, %v; want ErrTooManyRedirects", res, err)
		}
		if Retryable(err) || Kind(err) != "redirects" {
			t.Errorf("Retryable=%v Kind=%q", Retryable(err), Kind(err))
		}
	})
	t.Run("loop", func(t *testing.T) {
		_, err := f.Fetch(ctx, srv.URL+"/loop/a")
		if !errors.Is(err, ErrRedirectLoop) || !errors.Is(err, ErrTooManyRedirects) {
			t.Fatalf("Fetch err = %v; want ErrRedirectLoop", err)
		}
		if Retryable(err) || Kind(err) != "redirects" {
			t.Errorf("Retryable=%v Kind=%q", Retryable(err), Kind(err))
		}
	})
	t.Run("to other scheme", func(t *testing.T) {
		_, err := f.Fetch(ctx, srv.URL+"/ftp")
		if !errors.Is(err, ErrScheme) || Kind(err) != "scheme" || Retryable(err) {
			t.Fatalf("Fetch err = %v (kind %q); want ErrScheme", err, Kind(err))
		}
	})
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	retryAt := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mux := http.NewServeMux()
	mux.HandleFunc("/404", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusNotFound) })
	mux.HandleFunc("/429s", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	mux.HandleFunc("/429d", func(w http.ResponseWriter, r *http.Request) {
		// The server's Date header is the base for an HTTP-date Retry-After.
		w.Header().Set("Date", retryAt.Add(-90*time.Second).Format(http.TimeFormat))
		w.Header().Set("Retry-After", retryAt.Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	})
	mux.HandleFunc("/429big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "999999")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	mux.HandleFunc("/503", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "garbage")
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/500big", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write(bytes.Repeat([]byte("x"), 64<<10))
	})
	srv := serve(t, mux)
	f := newFetcher(t, Config{MaxBodyBytes: 32 << 10})
	ctx := context.Background()

	for _, tc := range []struct {
		path      string
		code      int
		retryable bool
		kind      string
		after     time.Duration
	}{
		{"/404", 404, false, "status_4xx", 0},
		{"/429s", 429, true, "status_429", 120 * time.Second},
		{"/429d", 429, true, "status_429", 90 * time.Second},
		{"/429big", 429, true, "status_429", time.Hour},
		{"/503", 503, true, "status_5xx", 0},
		{"/500big", 500, true, "status_5xx", 0}, // an oversized error page still reports its status
	} {
		t.Run(tc.path, func(t *testing.T) {
			res, err := f.Fetch(ctx, srv.URL+tc.path)
			var se *StatusError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("Fetch err = %v; want *StatusError %d", err, tc.code)
			}
			if res == nil || res.Status != tc.code {
				t.Fatalf("Fetch result = %+v; want the result with status %d too", res, tc.code)
			}
			if Retryable(err) != tc.retryable || Kind(err) != tc.kind {
				t.Errorf("Retryable=%v Kind=%q; want %v %q", Retryable(err), Kind(err), tc.retryable, tc.kind)
			}
			d, ok := RetryAfter(err)
			if d != tc.after || ok != (tc.after > 0) {
				t.Errorf("RetryAfter = %s, %v; want %s", d, ok, tc.after)
			}
		})
	}
	res, _ := f.Fetch(ctx, srv.URL+"/404")
	if !strings.Contains(string(res.Body), "nope") {
		t.Errorf("404 body = %q, want it kept for the caller", res.Body)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{" 5 ", 5 * time.Second, true},
		{"-3", 0, false},
		{"99999999999999999999", 0, false},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour, true},
		{"Mon, 99 Foo", 0, false},
		{"", 0, false},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/slow-headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		fmt.Fprint(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	srv := serve(t, mux)
	f := newFetcher(t, Config{ReadTimeout: 200 * time.Millisecond})
	for _, path := range []string{"/slow-headers", "/slow-body"} {
		t.Run(path, func(t *testing.T) {
			res, err := f.Fetch(context.Background(), srv.URL+path)
			if !errors.Is(err, ErrTimeout) || res != nil {
				t.Fatalf("Fetch = %v, %v; want ErrTimeout", res, err)
			}
			if !Retryable(err) || Kind(err) != "timeout" {
				t.Errorf("Retryable=%v Kind=%q; want true timeout", Retryable(err), Kind(err))
			}
		})
	}
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := f.Fetch(ctx, srv.URL+"/slow-headers")
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) || Kind(err) != "canceled" {
			t.Fatalf("Fetch err = %v (kind %q); want context.Canceled", err, Kind(err))
		}
	})
}

func TestConnectRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	f := newFetcher(t, Config{})
	_, err := f.Fetch(context.Background(), url)
	if err == nil || Kind(err) != "connect" || !Retryable(err) {
		t.Fatalf("Fetch err = %v (kind %q retryable %v); want retryable connect", err, Kind(err), Retryable(err))
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	big := bytes.Repeat([]byte("a"), 4*limit)
	mux := http.NewServeMux()
	mux.HandleFunc("/length", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		w.Write(big)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(big); i += 4096 {
			if _, err := w.Write(big[i : i+4096]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // chunked, no Content-Length
		w.Write(big[:limit])
	})
	srv := serve(t, mux)
	f := newFetcher(t, Config{MaxBodyBytes: limit})
	for _, path := range []string{"/length", "/chunked"} {
		t.Run(path, func(t *testing.T) {
			res, err := f.Fetch(context.Background(), srv.URL+path)
			if !errors.Is(err, ErrBodyTooLarge) || res != nil {
				t.Fatalf("Fetch = %v, %v; want ErrBodyTooLarge", res, err)
			}
			if Retryable(err) || Kind(err) != "too_large" {
				t.Errorf("Retryable=%v Kind=%q", Retryable(err), Kind(err))
			}
		})
	}
	t.Run("exactly at cap", func(t *testing.T) {
		res, err := f.Fetch(context.Background(), srv.URL+"/exact")
		if err != nil || len(res.Body) != limit {
			t.Fatalf("Fetch err = %v; want a body of exactly %d bytes", err, limit)
		}
	})
}

func gzipped(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCompression(t *testing.T) {
	t.Parallel()
	page := []byte(strings.Repeat("<p>compressible text</p>", 200))
	var zbuf, fbuf bytes.Buffer
	zw := zlib.NewWriter(&zbuf)
	zw.Write(page)
	zw.Close()
	fw, _ := flate.NewWriter(&fbuf, flate.DefaultCompression)
	fw.Write(page)
	fw.Close()
	encoded := map[string][]byte{"gzip": gzipped(t, page), "deflate-zlib": zbuf.Bytes(), "deflate-raw": fbuf.Bytes()}
	// 16 MiB of zeros compress to about 16 KiB: a bomb against a 1 MiB cap.
	bomb := gzipped(t, make([]byte, 16<<20))

	var sawAccept atomic.Value
	mux := http.NewServeMux()
	for name, body := range encoded {
		enc := strings.SplitN(name, "-", 2)[0]
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			sawAccept.Store(r.Header.Get("Accept-Encoding"))
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", enc)
			w.Write(body)
		})
	}
	mux.HandleFunc("/bomb", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(bomb)))
		w.Write(bomb)
	})
	mux.HandleFunc("/br", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		w.Write([]byte{1, 2, 3})
	})
	srv := serve(t, mux)
	f := newFetcher(t, Config{MaxBodyBytes: 1 << 20})

	for name, body := range encoded {
		t.Run(name, func(t *testing.T) {
			res, err := f.Fetch(context.Background(), srv.URL+"/"+name)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if !bytes.Equal(res.Body, page) {
				t.Errorf("decoded body differs: %d bytes, want %d", len(res.Body), len(page))
			}
			if res.Bytes != int64(len(body)) {
				t.Errorf("Bytes = %d, want wire size %d", res.Bytes, len(body))
			}
		})
	}
	if got := sawAccept.Load(); got != "gzip, deflate" {
		t.Errorf("server saw Accept-Encoding %q", got)
	}
	t.Run("bomb", func(t *testing.T) {
		res, err := f.Fetch(context.Background(), srv.URL+"/bomb")
		if !errors.Is(err, ErrBodyTooLarge) || res != nil {
			t.Fatalf("Fetch = %v, %v; want ErrBodyTooLarge", res, err)
		}
	})
	t.Run("unrequested encoding", func(t *testing.T) {
		_, err := f.Fetch(context.Background(), srv.URL+"/br")
		if !errors.Is(err, ErrContentEncoding) || Retryable(err) {
			t.Fatalf("Fetch err = %v; want ErrContentEncoding", err)
		}
	})
}

func TestCharset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		want              string
	}{
		{"latin1 header", "text/html; charset=ISO-8859-1", []byte("caf\xe9"), "café"},
		{"meta charset", "text/html", []byte(`<html><head><meta charset="windows-1251"></head><body>` + "\xcf\xf0\xe8\xe2\xe5\xf2</body></html>"),
			`<html><head><meta charset="windows-1251"></head><body>Привет</body></html>`},
		{"meta http-equiv, no header", "", []byte(`<html><head><meta http-equiv="Content-Type" content="text/html; charset=koi8-r"></head>` + "\xf0\xd2\xc9\xd7\xc5\xd4"),
			`<html><head><meta http-equiv="Content-Type" content="text/html; charset=koi8-r"></head>Привет`},
		{"utf-8 after 1024 ascii bytes", "text/html", []byte(strings.Repeat("a", 2000) + "é"), strings.Repeat("a", 2000) + "é"},
		{"no charset, not utf-8", "text/plain", []byte("na\xefve"), "naïve"},
		{"utf-8 BOM", "text/plain", []byte("\xef\xbb\xbfhi é"), "hi é"},
		{"utf-16 BOM", "text/plain", []byte("\xff\xfeh\x00i\x00"), "hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = []string{tc.contentType}
				w.Write(tc.body)
			}))
			res, err := newFetcher(t, Config{}).Fetch(context.Background(), srv.URL)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if string(res.Body) != tc.want {
				t.Errorf("body = %q, want %q", res.Body, tc.want)
			}
		})
	}
}

func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	bad := []byte("ok \xff\xfe\xc3 broken \xed\xa0\x80 end")
	for _, ct := range []string{"text/html; charset=utf-8", "text/html; charset=bogus-charset", "text/html; charset", "%%%"} {
		srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = []string{ct}
			w.Write(bad)
		}))
		res, err := newFetcher(t, Config{}).Fetch(context.Background(), srv.URL)
		if err != nil {
			t.Fatalf("Content-Type %q: Fetch: %v", ct, err)
		}
		if !utf8.Valid(res.Body) || !bytes.HasPrefix(res.Body, []byte("ok ")) || !bytes.HasSuffix(res.Body, []byte(" end")) {
			t.Errorf("Content-Type %q: body %q is not the repaired text", ct, res.Body)
		}
	}
}

func TestBinaryUntouched(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Del("Content-Type")
		w.Write(png)
	}))
	res, err := newFetcher(t, Config{}).Fetch(context.Background(), srv.URL)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if res.ContentType != "image/png" || !bytes.Equal(res.Body, png) {
		t.Errorf("got %q %q; want image/png with the bytes as sent", res.ContentType, res.Body)
	}
}

// recorder is a loopback server that counts the requests that reach it: a stand-in for the
// Lambda runtime API (127.0.0.1:9001) or any other service a crawled page must not reach.
func recorder(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"next":"invocation"}`)
	}))
	return srv, &hits
}

// The default fetcher refuses a loopback server, by address and by a name that resolves to it,
// with a page error that says what to set; the server never sees a request. The controls: the
// same server is reachable with AllowLoopback and with AllowPrivate.
func TestDefaultRefusesLoopback(t *testing.T) {
	t.Parallel()
	srv, hits := recorder(t)
	f, err := New(Config{ConnectTimeout: time.Minute, ReadTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	for _, u := range []string{srv.URL + "/2018-06-01/runtime/invocation/next", byName + "/x"} {
		_, err := f.Fetch(context.Background(), u)
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, ErrForbiddenAddress) || re.Class != "loopback" {
			t.Fatalf("Fetch(%s) err = %v; want a loopback *RefusedError", u, err)
		}
		if !strings.Contains(err.Error(), "is a loopback address; set allow_private: true") {
			t.Errorf("Fetch(%s) err = %q; want it to say what the address is and what to set", u, err)
		}
		if Kind(err) != "forbidden" || Retryable(err) || IsHostFailure(err) {
			t.Errorf("Fetch(%s): kind %q retryable %v host failure %v; want a permanent page failure of kind forbidden",
				u, Kind(err), Retryable(err), IsHostFailure(err))
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests through a refusing fetcher", n)
	}
	for _, cfg := range []Config{{AllowLoopback: true}, {AllowPrivate: true}} {
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Fetch(context.Background(), srv.URL+"/x"); err != nil {
			t.Errorf("Fetch with %+v: %v", cfg, err)
		}
		g.Close()
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the loopback server got %d requests from the allowed fetchers, want 2", n)
	}
}

// A public site that redirects to the runtime API: the redirect is followed through the guarded
// dialer, which refuses it, and the stand-in for the runtime API records no request. The public
// site is a loopback server reached by a route of this test's own (the name public.test dials it
// directly, as a public address would be dialed); every other connection takes the fetcher's
// guarded dialer, unchanged.
func TestRedirectToLoopbackRefused(t *testing.T) {
	t.Parallel()
	runtimeAPI, hits := recorder(t)
	public := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, runtimeAPI.URL+"/2018-06-01/runtime/invocation/next", http.StatusFound)
	}))
	for _, noFollow := range []bool{false, true} {
		f, err := New(Config{NoFollow: noFollow, ConnectTimeout: time.Minute, ReadTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		guarded := f.transport.DialContext
		var direct net.Dialer
		f.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == "public.test:80" {
				return direct.DialContext(ctx, network, public.Listener.Addr().String())
			}
			return guarded(ctx, network, addr)
		}
		res, err := f.Fetch(context.Background(), "http://public.test/start")
		if noFollow {
			// The crawler's way: the redirect comes back as a result, and its target is fetched as
			// a page of its own, through the same guard.
			if err != nil || res.Location == "" {
				t.Fatalf("no-follow fetch of the redirecting page: %+v %v", res, err)
			}
			_, err = f.Fetch(context.Background(), res.Location)
		}
		var re *RefusedError
		if !errors.As(err, &re) || re.Class != "loopback" {
			t.Errorf("NoFollow %v: err = %v; want a loopback *RefusedError", noFollow, err)
		}
		f.Close()
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the runtime API stand-in got %d requests through a redirect", n)
	}
}

// errNeverConnect ends a test dial after the guard let it through, before connect(): these tests
// send nothing to a non-loopback address.
var errNeverConnect = errors.New("test dialer: never connects")

// The guard of the dialer New builds, on addresses no test may send a packet to: its Control
// hook runs on the resolved address and refuses the non-public ones before connect(). The
// dialer's Control is wrapped to count the calls and to stop a dial the guard allows, so no
// address here is ever connected to.
func TestDialerRefusesNonPublicBeforeConnect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr  string
		class string // "" for an address the guard lets through
	}{
		{"127.0.0.1:9001", "loopback"},
		{"127.1.2.3:80", "loopback"},
		{"[::1]:80", "loopback"},
		{"[::ffff:127.0.0.1]:80", "loopback"},
		{"10.0.0.5:5432", "private"},
		{"172.16.0.1:80", "private"},
		{"172.31.255.254:80", "private"},
		{"192.168.1.1:80", "private"},
		{"100.64.0.1:80", "shared (CGNAT)"},
		{"100.127.255.254:80", "shared (CGNAT)"},
		{"[fd00::1]:80", "unique local"},
		{"[fc00::1]:80", "unique local"},
		{"169.254.169.254:80", "cloud metadata"},
		{"[::ffff:169.254.169.254]:80", "cloud metadata"},
		{"[fd00:ec2::254]:80", "cloud metadata"},
		{"169.254.170.2:80", "link-local"},
		{"[fe80::1]:80", "link-local"},
		{"0.0.0.0:80", "unspecified"},
		{"[::]:80", "unspecified"},
		{"[64:ff9b::a00:5]:80", "private"}, // 10.0.0.5 through NAT64
		{"198.18.0.10:80", "benchmarking"},
		{"198.19.255.1:80", "benchmarking"},
		{"192.0.0.8:80", "special-purpose"},
		{"224.0.0.1:80", "multicast"},
		{"239.255.255.250:1900", "multicast"},
		{"[ff02::1]:80", "multicast"},
		{"240.0.0.1:80", "reserved"},
		{"255.255.255.255:80", "reserved"},
		{"[::ffff:198.18.0.1]:80", "benchmarking"},
		{"198.20.0.1:80", ""},
		{"192.0.1.1:80", ""},
		{"93.184.216.34:443", ""},
		{"172.32.0.1:80", ""},
		{"100.128.0.1:80", ""},
		{"[2606:2800:220:1::1]:443", ""},
	}
	for _, c := range cases {
		for _, allowLoopback := range []bool{false, true} {
			d := newDialer(Config{AllowLoopback: allowLoopback, ConnectTimeout: time.Second})
			guard := d.Control
			if guard == nil {
				t.Fatal("the default dialer has no Control hook")
			}
			calls := 0
			d.Control = func(network, address string, rc syscall.RawConn) error {
				calls++
				if err := guard(network, address, rc); err != nil {
					return err
				}
				return errNeverConnect
			}
			_, err := d.DialContext(context.Background(), "tcp", c.addr)
			if calls == 0 {
				if strings.Contains(c.addr, ":") && strings.HasPrefix(c.addr, "[") {
					// This machine has no IPv6 socket: the dial failed before Control could run.
					t.Logf("dial %s: %v (no IPv6 here?)", c.addr, err)
					continue
				}
				t.Errorf("dial %s: Control not called (%v)", c.addr, err)
				continue
			}
			want := c.class
			if allowLoopback && want == "loopback" {
				want = ""
			}
			var re *RefusedError
			switch {
			case want == "" && !errors.Is(err, errNeverConnect):
				t.Errorf("dial %s (AllowLoopback %v): %v; want the guard to let it through", c.addr, allowLoopback, err)
			case want != "" && (!errors.As(err, &re) || re.Class != want || !errors.Is(err, ErrForbiddenAddress)):
				t.Errorf("dial %s (AllowLoopback %v): %v; want a %s *RefusedError", c.addr, allowLoopback, err, want)
			case want != "" && !strings.Contains(err.Error(), "is a "+want+" address"):
				t.Errorf("dial %s: %q does not name the kind of address", c.addr, err)
			}
		}
	}
	if d := newDialer(Config{AllowPrivate: true}); d.Control != nil {
		t.Error("AllowPrivate: the dialer still has a guard")
	}
	if err := (guard{}).control("tcp", "not-an-address", nil); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("unparseable address: %v, want ErrForbiddenAddress", err)
	}
}

func TestSchemeAndURL(t *testing.T) {
	t.Parallel()
	f := newFetcher(t, Config{})
	for u, kind := range map[string]string{
		"ftp://example.com/x":   "scheme",
		"file:///etc/passwd":    "scheme",
		"javascript:alert(1)":   "scheme",
		"example.com/no-scheme": "scheme",
		"http://":               "invalid_url",
		"http://[::1":           "invalid_url",
		"http://a b.com/":       "invalid_url",
		"\x00http://x":          "invalid_url",
	} {
		res, err := f.Fetch(context.Background(), u)
		if err == nil || res != nil || Kind(err) != kind || Retryable(err) {
			t.Errorf("Fetch(%q) = %v, %v (kind %q); want a %s error", u, res, err, Kind(err), kind)
		}
	}
}

func TestKindAndRetryableEdges(t *testing.T) {
	t.Parallel()
	if Kind(nil) != "" || Retryable(nil) {
		t.Errorf("nil error: Kind=%q Retryable=%v", Kind(nil), Retryable(nil))
	}
	if k := Kind(errors.New("mystery")); k != "other" {
		t.Errorf("Kind(unknown) = %q", k)
	}
	wrapped := fmt.Errorf("crawl page: %w", &StatusError{Code: 502})
	if !Retryable(wrapped) || Kind(wrapped) != "status_5xx" {
		t.Errorf("wrapped 502: Retryable=%v Kind=%q", Retryable(wrapped), Kind(wrapped))
	}
	if !Retryable(&StatusError{Code: 408}) || Retryable(&StatusError{Code: 410}) {
		t.Errorf("408 should retry, 410 should not")
	}
}

func BenchmarkFetch(b *testing.B) {
	page := []byte("<html><head><title>bench</title></head><body>" + strings.Repeat("<a href=\"/x\">link</a>", 50) + "</body></html>")
	srv := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	}))
	f := newFetcher(b, Config{})
	b.ReportAllocs()
	b.SetBytes(int64(len(page)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.Fetch(context.Background(), srv.URL+"/page"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestNoFollowReturnsTheRedirect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new?x=1", http.StatusMovedPermanently)
			return
		}
		fmt.Fprint(w, "new")
	}))
	defer srv.Close()
	f, err := New(Config{NoFollow: true, AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Fetch(context.Background(), srv.URL+"/old")
	if err != nil || res.Status != http.StatusMovedPermanently || res.Location != srv.URL+"/new?x=1" || res.Redirects != 0 {
		t.Fatalf("no-follow fetch: %+v %v", res, err)
	}
}

// The common header's shortcut in decodeText decides what the general path decides: compare
// it with a spelling of the same header that takes the general path.
func TestDecodeTextShortcutMatchesGeneralPath(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"", "<p>plain</p>", "\xef\xbb\xbf<p>bom</p>", "\xfe\xff\x00<\x00p", "\xff\xfe<\x00p\x00",
		"<p>bad \xff\xc3 bytes</p>", `<meta charset="windows-1252"><p>caf` + "\xe9</p>", "\x00nul"} {
		for _, fast := range []string{"text/html; charset=utf-8", "TEXT/HTML;charset=UTF-8"} {
			if !isHTMLUTF8(fast) {
				t.Fatalf("%q does not take the shortcut", fast)
			}
			mt, got := decodeText([]byte(body), fast)
			wantMT, want := decodeText([]byte(body), `text/html; charset="utf-8"`)
			if mt != wantMT || !bytes.Equal(got, want) {
				t.Errorf("body %q, %q: (%q, %q), general path (%q, %q)", body, fast, mt, got, wantMT, want)
			}
		}
	}
}

// FetchIf sends the validators it is given, and a 304 is an answer, not an error.
func TestFetchIfSendsValidators(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		fmt.Fprint(w, "<html>page</html>")
	}))
	defer srv.Close()
	f, err := New(Config{AllowLoopback: true, NoFollow: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.FetchIf(context.Background(), srv.URL, Validators{ETag: `"v1"`, LastModified: "Thu, 01 Jan 2026 00:00:00 GMT"})
	if err != nil || res.Status != http.StatusNotModified || len(res.Body) != 0 {
		t.Fatalf("FetchIf = %+v, %v; want a 304 without body or error", res, err)
	}
	// No body is read or sniffed for it: no content type is made up.
	if res.ContentType != "" {
		t.Errorf("a 304 without Content-Type: ContentType %q, want none", res.ContentType)
	}
	if got.Get("If-None-Match") != `"v1"` || got.Get("If-Modified-Since") != "Thu, 01 Jan 2026 00:00:00 GMT" {
		t.Errorf("sent If-None-Match %q, If-Modified-Since %q", got.Get("If-None-Match"), got.Get("If-Modified-Since"))
	}
	res, err = f.Fetch(context.Background(), srv.URL)
	if err != nil || res.Status != 200 || got.Get("If-None-Match") != "" {
		t.Errorf("Fetch = %v, %v, sent If-None-Match %q; want 200 and no validator", res.Status, err, got.Get("If-None-Match"))
	}
}

// FetchURL fetches a URL parsed already as Fetch fetches its text: the same request (validators,
// headers, "host:" as the host), the same answer, and the caller's URL left as it was.
func TestFetchURLSendsTheParsedURL(t *testing.T) {
	var got *http.Request
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html>page</html>")
	}))
	f := newFetcher(t, Config{NoFollow: true, UserAgent: "ua/1"})
	u, err := url.Parse(srv.URL + "/a/b?c=d")
	if err != nil {
		t.Fatal(err)
	}
	before := *u
	res, err := f.FetchURL(context.Background(), u, Validators{}, []*http.Cookie{{Name: "s", Value: "1"}})
	if err != nil || res.Status != 200 || string(res.Body) != "<html>page</html>" || res.ContentType != "text/html" || res.URL != srv.URL+"/a/b?c=d" {
		t.Fatalf("FetchURL = %+v, %v; want the page", res, err)
	}
	if got.URL.RequestURI() != "/a/b?c=d" || got.Host != u.Host || got.UserAgent() != "ua/1" || got.Header.Get("Cookie") != "s=1" || got.Header.Get("Accept-Encoding") != "gzip, deflate" {
		t.Errorf("sent %s %s, Host %q, headers %v", got.Method, got.URL, got.Host, got.Header)
	}
	res, err = f.FetchURL(context.Background(), u, Validators{ETag: `"v1"`}, nil)
	if err != nil || res.Status != http.StatusNotModified || len(res.Body) != 0 {
		t.Errorf("FetchURL with validators = %+v, %v; want a 304", res, err)
	}
	colon := *u
	colon.Host += ":"
	if res, err := f.FetchURL(context.Background(), &colon, Validators{}, nil); err != nil || res.Status != 200 || got.Host != u.Host {
		t.Errorf("FetchURL of %q = %v, %v, sent Host %q; want the page from %q", colon.Host, res, err, got.Host, u.Host)
	}
	if *u != before || colon.Host != u.Host+":" {
		t.Errorf("FetchURL changed the caller's URL: %v, %v", u, &colon)
	}
	if _, err := f.FetchURL(context.Background(), &url.URL{Scheme: "ftp", Host: "example.com"}, Validators{}, nil); !errors.Is(err, ErrScheme) {
		t.Errorf("FetchURL of an ftp URL: %v, want ErrScheme", err)
	}
	if _, err := f.FetchURL(context.Background(), &url.URL{Scheme: "http", Path: "/x"}, Validators{}, nil); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("FetchURL of a URL without host: %v, want ErrInvalidURL", err)
	}
}

// BenchmarkFetchNotModified is a recrawl's request: a conditional GET answered 304.
func BenchmarkFetchNotModified(b *testing.B) {
	srv := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	}))
	f := newFetcher(b, Config{NoFollow: true})
	u, err := url.Parse(srv.URL + "/page")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := f.FetchURL(context.Background(), u, Validators{ETag: `"v1"`}, nil); err != nil || res.Status != http.StatusNotModified {
			b.Fatalf("FetchURL = %v, %v", res, err)
		}
	}
}
