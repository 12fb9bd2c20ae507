package image_test

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"crawlq/internal/image"
)

// The mmdebstrap recipe of a Debian root file system with Chromium: the command, checked without
// running it (it downloads Debian's packages; see docs/browser.md for the real build).
func TestRootfsRecipe(t *testing.T) {
	args, err := image.RootfsRecipe{Out: "build/rootfs.tar"}.Args()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--variant=apt", "--format=tar", "--architectures=amd64", "--include=chromium,ca-certificates,fonts-liberation", "--dpkgopt=path-exclude=/usr/share/doc/*"} {
		if !slices.Contains(args, want) {
			t.Errorf("mmdebstrap %v lacks %s", args, want)
		}
	}
	if n := len(args); args[n-2] != "bookworm" || args[n-1] != "build/rootfs.tar" {
		t.Errorf("mmdebstrap %v: want ... bookworm build/rootfs.tar at the end", args)
	}
	args, _ = image.RootfsRecipe{Out: "o.tar", Suite: "trixie", Mirror: "http://127.0.0.1:3142/debian", Packages: []string{"chromium"}}.Args()
	if n := len(args); strings.Join(args[n-3:], " ") != "trixie o.tar http://127.0.0.1:3142/debian" || !slices.Contains(args, "--include=chromium") {
		t.Errorf("mmdebstrap %v", args)
	}
	for _, bad := range []image.RootfsRecipe{{}, {Out: "o.tar", Packages: []string{"--root"}}, {Out: "o.tar", Packages: []string{"a,b"}}} {
		if _, err := bad.Args(); err == nil {
			t.Errorf("recipe %+v taken", bad)
		}
	}
}

// writeRootfs writes a root file system tarball holding files (path -> mode; a mode 0 entry is a
// symbolic link to /usr/lib/chromium/chromium).
func writeRootfs(t *testing.T, files map[string]int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, d := range []string{"./", "./usr/", "./usr/bin/", "./usr/lib/", "./usr/lib/chromium/", "./etc/"} {
		tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for name, mode := range files {
		h := &tar.Header{Name: "./" + name, Typeflag: tar.TypeReg, Mode: mode, Size: 4}
		if mode == 0 {
			h = &tar.Header{Name: "./" + name, Typeflag: tar.TypeSymlink, Linkname: "/usr/lib/chromium/chromium", Mode: 0o777}
		}
		tw.WriteHeader(h)
		if h.Size > 0 {
			tw.Write([]byte("\x7fELF"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// A runner image on a Debian root file system holding Chromium has both, runs as root (Chromium
// starts without its sandbox), and RequireChromium refuses an image without it, saying how to
// get one.
func TestChromiumRunnerImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)

	base, err := image.LoadRootfs(writeRootfs(t, map[string]int64{"usr/lib/chromium/chromium": 0o755, "usr/bin/chromium": 0, "etc/debian_version": 0o644}))
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(image.Config{Binary: "/bin/true", CACerts: ca, Base: base, RequireChromium: true})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := image.FindChromium(img); err != nil || p != "/usr/lib/chromium/chromium" {
		t.Errorf("FindChromium: %q, %v", p, err)
	}
	names := map[string]bool{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[strings.TrimPrefix(h.Name, "./")] = true
	}
	for _, want := range []string{"crawlq", "usr/bin/chromium", "etc/debian_version", "etc/crawlq/ca-certificates.crt"} {
		if !names[want] {
			t.Errorf("the image lacks /%s", want)
		}
	}
	cf, _ := img.ConfigFile()
	if cf.Config.User != "0:0" || !slices.Contains(cf.Config.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") ||
		strings.Join(cf.Config.Entrypoint, " ") != "/crawlq runner" {
		t.Errorf("config: user %q, env %v, entrypoint %v", cf.Config.User, cf.Config.Env, cf.Config.Entrypoint)
	}

	// Without Chromium: scratch, and a root file system whose chromium is not executable.
	noExec, _ := image.LoadRootfs(writeRootfs(t, map[string]int64{"usr/lib/chromium/chromium": 0o644}))
	for name, b := range map[string]image.Config{
		"scratch":        {Binary: "/bin/true", CACerts: ca, RequireChromium: true},
		"not executable": {Binary: "/bin/true", CACerts: ca, Base: noExec, RequireChromium: true},
	} {
		_, err := image.Build(b)
		if err == nil || !strings.Contains(err.Error(), "RequireChromium: no Chromium in the image") || !strings.Contains(err.Error(), "crawlq image --chromium") {
			t.Errorf("%s: %v; want the missing Chromium named with the way to get it", name, err)
		}
	}
}
