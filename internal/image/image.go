// Package image builds the runner's container image without a Docker daemon, with
// go-containerregistry: one layer holding the static crawlq binary, the CA certificates and an
// empty /tmp, with `crawlq runner` as the entrypoint, on an empty base (scratch) or on a team's
// own image (Config.Base, read by LoadBase from an OCI layout directory or an image tarball),
// whose layers, environment, user and working directory it keeps: command spiders then find
// the team's interpreters and libraries. It writes the image as a tarball that `crawlq deploy`
// (or crane) can push to ECR. The Dockerfile at the repository root builds the scratch image
// where a Docker daemon is available.
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
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths inside the image.
const (
	BinaryPath  = "/crawlq"
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// BaseCACertsPath is where the CA bundle goes on a base image, so that the base's own
	// /etc/ssl/certs stays as it is.
	BaseCACertsPath = "/etc/crawlq/ca-certificates.crt"
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
	// Base is the image the runner layer goes on (see LoadBase). Default none: scratch. It
	// must be linux/amd64. Its layers, Env, User (unless User is set) and WorkingDir are kept;
	// the entrypoint becomes ["/crawlq", "runner"] with no Cmd.
	Base v1.Image
	// RequireChromium fails the build when the image has no Chromium (FindChromium): a runner
	// for render: browser spiders. Default false.
	RequireChromium bool
}

func (c *Config) setDefaults() {
	if c.CACerts == "" {
		c.CACerts = "/etc/ssl/certs/ca-certificates.crt"
	}
	if len(c.Entrypoint) == 0 {
		c.Entrypoint = []string{BinaryPath, "runner"}
	}
	if c.User == "" && c.Base == nil {
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
	var baseCfg *v1.ConfigFile
	if cfg.Base != nil {
		if baseCfg, err = cfg.Base.ConfigFile(); err != nil {
			return nil, fmt.Errorf("read base image config: %w", err)
		}
		if baseCfg.OS != "linux" || baseCfg.Architecture != "amd64" {
			return nil, fmt.Errorf("image config: Base is %s/%s; the runner binary is linux/amd64", baseCfg.OS, baseCfg.Architecture)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	type entry struct {
		name string
		mode int64
		data []byte
		dir  bool
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: CACertsPath[1:], mode: 0o644, data: certs},
		// Command spiders and Go's os.TempDir need a writable /tmp.
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: BinaryPath[1:], mode: 0o755, data: bin},
	}
	if cfg.Base != nil {
		// Leave the base's /etc/ssl/certs alone; bring ours beside it.
		entries = []entry{
			{name: "etc/", mode: 0o755, dir: true},
			{name: "etc/crawlq/", mode: 0o755, dir: true},
			{name: BaseCACertsPath[1:], mode: 0o644, data: certs},
			{name: "tmp/", mode: 0o1777, dir: true},
			{name: BinaryPath[1:], mode: 0o755, data: bin},
		}
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
	// The layer's media type follows the manifest's: a Docker base gets a Docker layer.
	layerType := types.OCILayer
	if cfg.Base != nil {
		if mt, err := cfg.Base.MediaType(); err == nil && mt == types.DockerManifestSchema2 {
			layerType = types.DockerLayer
		}
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(layerType))
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	base := cfg.Base
	if base == nil {
		base = mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	}
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
	if baseCfg == nil {
		cf.Config.User = cfg.User
		cf.Config.WorkingDir = "/tmp"
		cf.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=" + CACertsPath}
		cf.Config.Labels = map[string]string{"org.opencontainers.image.title": "crawlq runner"}
	} else {
		// The team's environment stays (PATH, interpreters' settings); the runner's entrypoint
		// is absolute, so it needs nothing from PATH.
		if cfg.User != "" {
			cf.Config.User = cfg.User
		}
		if cf.Config.WorkingDir == "" {
			cf.Config.WorkingDir = "/tmp"
		}
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		cf.Config.Labels["org.opencontainers.image.title"] = "crawlq runner"
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	if cfg.RequireChromium {
		if _, err := FindChromium(img); err != nil {
			return nil, fmt.Errorf("image config: RequireChromium: %w", err)
		}
	}
	return img, nil
}

// LoadBase reads a base image from path: an OCI image layout directory (the image for
// linux/amd64 when it holds an index of several), or an image tarball (`docker save`, or the
// tarballs WriteTarball writes).
func LoadBase(path string) (v1.Image, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	if !st.IsDir() {
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, fmt.Errorf("base image %s: not an image tarball: %w", path, err)
		}
		return img, nil
	}
	idx, err := layout.ImageIndexFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("base image %s: not an OCI image layout: %w", path, err)
	}
	return pickAmd64(idx, path)
}

// pickAmd64 finds the linux/amd64 image in an index, descending into nested indexes, or the
// only image when there is exactly one without a platform.
func pickAmd64(idx v1.ImageIndex, path string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", path, err)
	}
	var only []v1.Hash
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("base image %s: %w", path, err)
			}
			if img, err := pickAmd64(child, path); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage():
			if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == "amd64" {
				return idx.Image(d.Digest)
			}
			if d.Platform == nil {
				only = append(only, d.Digest)
			}
		}
	}
	if len(only) == 1 {
		return idx.Image(only[0])
	}
	return nil, fmt.Errorf("base image %s: no linux/amd64 image in it", path)
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
