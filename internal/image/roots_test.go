package image_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"

	"crawlq/internal/image"
)

// The runner verifies RDS Proxy's certificate (verify-full, internal/db) against the CA bundle
// the image ships; the proxy's certificates come from ACM and chain to the Amazon Root CAs, so
// the bundle `make image` copies in must hold them.
func TestDefaultBundleHoldsAmazonRoots(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(image.CACertsPath) // Config.CACerts' default is the build machine's bundle at the same path
	if err != nil {
		t.Fatalf("the default CA bundle: %v (install ca-certificates)", err)
	}
	found := map[string]bool{}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			found[c.Subject.CommonName] = true
		}
	}
	for _, cn := range []string{"Amazon Root CA 1", "Amazon Root CA 2", "Amazon Root CA 3", "Amazon Root CA 4"} {
		if !found[cn] {
			t.Errorf("%s is not in %s", cn, image.CACertsPath)
		}
	}
}
