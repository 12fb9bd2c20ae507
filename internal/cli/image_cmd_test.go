package cli_test

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"crawlq/internal/image"
)

// crawlq image --rootfs TAR --chromium builds the runner image on a root file system holding
// Chromium, and refuses one without it, or --base with --rootfs.
func TestImageWithChromium(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rootfs := func(name string, withChromium bool) string {
		p := filepath.Join(dir, name)
		f, _ := os.Create(p)
		tw := tar.NewWriter(f)
		tw.WriteHeader(&tar.Header{Name: "./usr/lib/chromium/", Typeflag: tar.TypeDir, Mode: 0o755})
		if withChromium {
			tw.WriteHeader(&tar.Header{Name: "./usr/lib/chromium/chromium", Typeflag: tar.TypeReg, Mode: 0o755, Size: 4})
			tw.Write([]byte("\x7fELF"))
		}
		tw.Close()
		f.Close()
		return p
	}
	out := filepath.Join(dir, "runner.tar")
	code, stdout, stderr := run(t, "", "image", "--binary", "/bin/true", "--rootfs", rootfs("with.tar", true), "--chromium", "--out", out)
	if code != 0 || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("image --rootfs --chromium: %d %q %q", code, stdout, stderr)
	}
	img, err := image.LoadBase(out)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := image.FindChromium(img); err != nil || p != "/usr/lib/chromium/chromium" {
		t.Errorf("the written image: Chromium %q, %v", p, err)
	}
	code, _, stderr = run(t, "", "image", "--binary", "/bin/true", "--rootfs", rootfs("without.tar", false), "--chromium", "--out", out)
	if code == 0 || !strings.Contains(stderr, "no Chromium in the image") {
		t.Errorf("a root file system without Chromium: %d %q", code, stderr)
	}
	code, _, stderr = run(t, "", "image", "--binary", "/bin/true", "--rootfs", out, "--base", out)
	if code == 0 || !strings.Contains(stderr, "--base and --rootfs") {
		t.Errorf("--base with --rootfs: %d %q", code, stderr)
	}
}
