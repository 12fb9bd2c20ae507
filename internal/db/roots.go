package db

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// maxRootsBytes bounds a fetched root bundle (AWS's global RDS bundle is about 160 KB).
const maxRootsBytes = 1 << 20

// FetchRoots downloads a PEM bundle of root certificates over HTTPS, verified by client's
// trust (the system roots with http.DefaultClient's transport): how a process that connects to
// an RDS instance directly gets the RDS roots, which no system trust store holds, from AWS's
// trust store (https://truststore.pki.rds.amazonaws.com/REGION/REGION-bundle.pem). It refuses
// a URL that is not https, an answer other than 200, and a body without a certificate.
func FetchRoots(ctx context.Context, client *http.Client, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("db: CA bundle URL %q: want an https:// URL", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("db: CA bundle: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("db: fetch CA bundle: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("db: fetch CA bundle %s: %s", rawURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRootsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("db: read CA bundle %s: %w", rawURL, err)
	}
	if len(b) > maxRootsBytes {
		return nil, fmt.Errorf("db: CA bundle %s is over %d bytes", rawURL, maxRootsBytes)
	}
	if _, err := rootPool(b); err != nil {
		return nil, fmt.Errorf("db: CA bundle %s: %w", rawURL, err)
	}
	return b, nil
}

func rootPool(pemBytes []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		return nil, errors.New("no PEM certificate in it")
	}
	return p, nil
}
