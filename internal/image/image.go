// Package image builds the runner's container image without a Docker daemon, with
// go-containerregistry: one layer holding the static crawlq binary, the CA certificates and an
// empty /tmp, on an empty base (scratch), with `crawlq runner` as the entrypoint. It writes the
// image as a tarball that `crawlq deploy` (or crane) can push to ECR. The Dockerfile at the
// repository root builds the same image where a Docker daemon is available.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths inside the image.
const (
	BinaryPath  = "/crawlq"
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// Config describes the image.
type Config struct {
	// Binary is the linux/amd64 static crawlq binary (CGO_ENABLED=0). Required.
	Binary string
	// CACerts is the CA bundle copied into the image, so the runner can reach HTTPS sites and
	// AWS. Default /etc/ssl/certs/ca-certificates.crt of the build machine.
	CACerts string
	// Entrypoint defaults to ["/crawlq", "runner"].
	Entrypoint []string
	// User defaults to "65532:65532" (nobody needs root to crawl).
	User string
	// Created is the image's creation time. Default the Unix epoch, so builds are reproducible.
	Created time.Time
}

func (c *Config) setDefaults() {
	if c.CACerts == "" {
		c.CACerts = "/etc/ssl/certs/ca-certificates.crt"
	}
	if len(c.Entrypoint) == 0 {
		c.Entrypoint = []string{BinaryPath, "runner"}
	}
	if c.User == "" {
		c.User = "65532:65532"
	}
}

// Build assembles the image.
func Build(cfg Config) (v1.Image, error) {
	cfg.setDefaults()
	if cfg.Binary == "" {
		return nil, errors.New("image config: Binary is required")
	}
	bin, err := os.ReadFile(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("image config: Binary %s is not an ELF executable (build it with GOOS=linux)", cfg.Binary)
	}
	certs, err := os.ReadFile(cfg.CACerts)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	entries := []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: CACertsPath[1:], mode: 0o644, data: certs},
		// Command spiders and Go's os.TempDir need a writable /tmp.
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: BinaryPath[1:], mode: 0o755, data: bin},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("add layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: cfg.Created.UTC()}
	if cfg.Created.IsZero() {
		cf.Created = v1.Time{Time: epoch.UTC()}
	}
	cf.Config.Entrypoint = cfg.Entrypoint
	cf.Config.Cmd = nil
	cf.Config.User = cfg.User
	cf.Config.WorkingDir = "/tmp"
	cf.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=" + CACertsPath}
	cf.Config.Labels = map[string]string{"org.opencontainers.image.title": "crawlq runner"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

// WriteTarball writes img to path as an image tarball tagged ref (e.g. "crawlq-runner:latest"),
// which tarball.ImageFromPath (and so crane push) reads back.
func WriteTarball(img v1.Image, ref, path string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("parse image reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("write image tarball: %w", err)
	}
	return nil
}
