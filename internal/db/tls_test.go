package db_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/db"
)

// tlsServer speaks just enough of the PostgreSQL protocol to accept an SSLRequest and run the
// TLS handshake with cert; it reports each handshake's outcome on the returned channel.
func tlsServer(t *testing.T, cert tls.Certificate) (addr string, handshakes <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan error, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req := make([]byte, 8) // length + SSLRequest code
				if _, err := io.ReadFull(c, req); err != nil {
					ch <- err
					return
				}
				c.Write([]byte("S"))
				ch <- tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}}).Handshake()
			}()
		}
	}()
	return ln.Addr().String(), ch
}

// newCA makes a CA and a server certificate signed by it for the names given.
func newCA(t *testing.T, dnsNames []string, ips []net.IP) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: dnsNames, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A Host connection verifies the server: a certificate from an untrusted root or for another
// name fails the connection; the right root and name pass the handshake. Nothing falls back to
// plaintext.
func TestTLSVerifiesServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		ips     []net.IP
		caFile  bool
		wantErr string // in the client's error; "" means the handshake must succeed
	}{
		{name: "untrusted root", ips: []net.IP{net.ParseIP("127.0.0.1")}, caFile: false, wantErr: "certificate"},
		{name: "wrong name", ips: []net.IP{net.ParseIP("127.0.0.2")}, caFile: true, wantErr: "127.0.0.1"},
		{name: "verified", ips: []net.IP{net.ParseIP("127.0.0.1")}, caFile: true},
	} {
		caPEM, cert := newCA(t, []string{"db.example"}, tc.ips)
		addr, handshakes := tlsServer(t, cert)
		host, port, _ := net.SplitHostPort(addr)
		cfg := db.Config{Host: host, User: "u", Name: "d", TLS: true}
		cfg.Port, _ = strconv.Atoi(port)
		if tc.caFile {
			cfg.CAFile = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".pem")
			if err := os.WriteFile(cfg.CAFile, caPEM, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		pc, err := cfg.PoolConfig()
		if err != nil {
			t.Fatal(err)
		}
		if len(pc.ConnConfig.Fallbacks) != 0 || pc.ConnConfig.TLSConfig == nil {
			t.Fatalf("%s: TLS config %+v with %d fallbacks, want TLS and no fallback", tc.name, pc.ConnConfig.TLSConfig, len(pc.ConnConfig.Fallbacks))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = db.Open(ctx, cfg)
		cancel()
		if err == nil {
			t.Fatalf("%s: connected to a server that speaks no PostgreSQL", tc.name)
		}
		hs := <-handshakes
		if tc.wantErr == "" {
			if hs != nil {
				t.Errorf("%s: handshake failed on the server: %v (client: %v)", tc.name, hs, err)
			}
			continue
		}
		if hs == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: server handshake %v, client error %v; want a failed handshake and an error mentioning %q", tc.name, hs, err, tc.wantErr)
		}
	}
}
