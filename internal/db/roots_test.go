package db_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/db"
)

// A direct connection to an RDS instance trusts the roots fetched over HTTPS from the trust
// store (FetchRoots into CAPEM): a loopback HTTPS server stands in for it. The fetched root
// verifies the server; without it the same server is refused; and what is not an https URL,
// a 200 answer and a PEM certificate is refused by FetchRoots.
func TestFetchedRootsVerifyServer(t *testing.T) {
	t.Parallel()
	caPEM, cert := newCA(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	store := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/us-east-1/us-east-1-bundle.pem":
			w.Write(caPEM)
		case "/junk.pem":
			w.Write([]byte("<html>not a bundle</html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(store.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	roots, err := db.FetchRoots(ctx, store.Client(), store.URL+"/us-east-1/us-east-1-bundle.pem")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ url, want string }{
		{"http" + strings.TrimPrefix(store.URL, "https") + "/us-east-1/us-east-1-bundle.pem", "https"},
		{store.URL + "/missing.pem", "404"},
		{store.URL + "/junk.pem", "no PEM certificate"},
	} {
		if _, err := db.FetchRoots(ctx, store.Client(), bad.url); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("FetchRoots(%s): %v, want an error mentioning %q", bad.url, err, bad.want)
		}
	}
	// The system roots do not trust the test store: its certificate is refused.
	if _, err := db.FetchRoots(ctx, &http.Client{}, store.URL+"/us-east-1/us-east-1-bundle.pem"); err == nil {
		t.Error("FetchRoots trusted a server the system roots do not")
	}

	for _, withRoots := range []bool{false, true} {
		addr, handshakes := tlsServer(t, cert)
		host, port, _ := net.SplitHostPort(addr)
		cfg := db.Config{Host: host, User: "u", Name: "d", TLS: true}
		cfg.Port, _ = strconv.Atoi(port)
		if withRoots {
			cfg.CAPEM = roots
		}
		octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := db.Open(octx, cfg)
		ocancel()
		if err == nil {
			t.Fatal("connected to a server that speaks no PostgreSQL")
		}
		hs := <-handshakes
		if withRoots && hs != nil {
			t.Errorf("with the fetched roots: handshake failed on the server: %v (client: %v)", hs, err)
		}
		if !withRoots && (hs == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Errorf("without the fetched roots: server handshake %v, client %v; want the certificate refused", hs, err)
		}
	}
	if _, err := (db.Config{Host: "h", TLS: true, CAPEM: []byte("nothing")}).PoolConfig(); err == nil || !strings.Contains(err.Error(), "CAPEM") {
		t.Errorf("CAPEM without a certificate: %v, want an error naming CAPEM", err)
	}
}
