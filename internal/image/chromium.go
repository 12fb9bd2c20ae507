package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A runner that renders pages (render: browser) needs Chromium in its image. Without a Docker
// daemon it comes from Debian's packages: mmdebstrap assembles a minimal Debian root filesystem
// holding chromium as a tarball (RootfsRecipe), which becomes the base image (LoadRootfs) the
// runner layer goes on. A team's own image with Chromium (--base) does as well. Build's
// Config.RequireChromium checks the result has it.

// ChromiumPaths are where an image may hold Chromium: what internal/browser looks for on PATH
// (chromium, chromium-browser, google-chrome, google-chrome-stable), in the directories of a
// Debian PATH, and Debian's binary behind its launcher script.
var ChromiumPaths = []string{
	"usr/lib/chromium/chromium",
	"usr/bin/chromium", "usr/bin/chromium-browser", "usr/bin/google-chrome", "usr/bin/google-chrome-stable",
	"usr/local/bin/chromium", "bin/chromium",
}

// RootfsRecipe is how a Debian root filesystem with Chromium is built by mmdebstrap.
type RootfsRecipe struct {
	// Suite is the Debian release. Default "bookworm".
	Suite string
	// Mirror is the Debian mirror. Default mmdebstrap's (deb.debian.org).
	Mirror string
	// Packages are installed besides the essential ones. Default DefaultRootfsPackages.
	Packages []string
	// Out is the tarball written. Required.
	Out string
}

// DefaultRootfsPackages: Chromium, the CA bundle its TLS and the runner use, and a font so pages
// lay out as they would for a visitor.
var DefaultRootfsPackages = []string{"chromium", "ca-certificates", "fonts-liberation"}

// Args are mmdebstrap's arguments: the apt variant (essential packages and apt, no init), the
// packages, documentation, man pages and apt's lists left out, written as a tarball.
func (r RootfsRecipe) Args() ([]string, error) {
	if r.Out == "" {
		return nil, errors.New("rootfs recipe: Out is required")
	}
	suite := r.Suite
	if suite == "" {
		suite = "bookworm"
	}
	pkgs := r.Packages
	if len(pkgs) == 0 {
		pkgs = DefaultRootfsPackages
	}
	for _, p := range pkgs {
		if p == "" || strings.HasPrefix(p, "-") || strings.ContainsAny(p, ", \t\n") {
			return nil, fmt.Errorf("rootfs recipe: package %q is not a Debian package name", p)
		}
	}
	args := []string{
		"--variant=apt",
		"--architectures=amd64",
		"--format=tar",
		"--include=" + strings.Join(pkgs, ","),
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--aptopt=Acquire::Languages \"none\"",
		`--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*`,
		suite, r.Out,
	}
	if r.Mirror != "" {
		args = append(args, r.Mirror)
	}
	return args, nil
}

// LoadRootfs makes a base image of a root filesystem tarball (RootfsRecipe's): one layer, on
// linux/amd64, with Debian's PATH. The runner runs in it as root, so Chromium starts without
// its sandbox, which a Fargate task cannot set up (internal/browser).
func LoadRootfs(path string) (v1.Image, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	layer, err := tarball.LayerFromFile(path, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("rootfs %s: %w", path, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("rootfs %s: %w", path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.User = "0:0"
	return mutate.ConfigFile(img, cf)
}

// FindChromium returns the path of Chromium in img's file system (one of ChromiumPaths, a
// regular executable file or a symbolic link), or an error saying it has none.
func FindChromium(img v1.Image) (string, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	want, found := map[string]bool{}, map[string]bool{}
	for _, p := range ChromiumPaths {
		want[p] = true
	}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read image file system: %w", err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if !want[name] {
			continue
		}
		if h.Typeflag == tar.TypeSymlink || (h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0) {
			found[name] = true
		}
	}
	// The first of ChromiumPaths the image has, whatever the order of its files: Debian's binary
	// before the launchers that lead to it.
	for _, p := range ChromiumPaths {
		if found[p] {
			return "/" + p, nil
		}
	}
	return "", fmt.Errorf("no Chromium in the image (looked for /%s); build a base with Chromium: crawlq image --chromium (Debian's chromium, by mmdebstrap), or --base an image that has it",
		strings.Join(ChromiumPaths, ", /"))
}
