package image_test

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"crawlq/internal/image"
)

// teamImage is a small base image as a team would have: two layers, its own PATH and
// variables, a user and a working directory, on linux/amd64.
func teamImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONPATH=/team/lib", "TEAM=scrapers"}
	cf.Config.User = "1000:1000"
	cf.Config.WorkingDir = "/team"
	cf.Config.Entrypoint = []string{"/usr/bin/python3"}
	cf.Config.Cmd = []string{"-m", "team"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// The runner layered onto a team's image, read back from an OCI layout directory and from a
// tarball: their layers come first and unchanged, their environment, user and working directory
// stay, the entrypoint is the runner's, and the binary is in the new top layer.
func TestBuildOnBase(t *testing.T) {
	t.Parallel()
	base := teamImage(t)
	dir := t.TempDir()

	layoutDir := filepath.Join(dir, "oci")
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(base, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "team.tar")
	tag, _ := name.NewTag("team/scrapers:1")
	if err := tarball.WriteToFile(tarPath, tag, base); err != nil {
		t.Fatal(err)
	}

	for _, src := range []string{layoutDir, tarPath} {
		loaded, err := image.LoadBase(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		img, err := image.Build(image.Config{Binary: "/bin/true", Base: loaded})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want, got := layerDigests(t, base), layerDigests(t, img)
		if len(got) != len(want)+1 || !slices.Equal(got[:len(want)], want) {
			t.Errorf("%s: layers %v, want the base's %v then one more", src, got, want)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cf.Config.Env, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONPATH=/team/lib", "TEAM=scrapers"}) ||
			cf.Config.User != "1000:1000" || cf.Config.WorkingDir != "/team" {
			t.Errorf("%s: env %v user %q workdir %q; want the base's kept", src, cf.Config.Env, cf.Config.User, cf.Config.WorkingDir)
		}
		if strings.Join(cf.Config.Entrypoint, " ") != "/crawlq runner" || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want /crawlq runner and no cmd", src, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		ls, _ := img.Layers()
		rc, err := ls[len(ls)-1].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
		}
		rc.Close()
		if !slices.Contains(names, "crawlq") || slices.Contains(names, "etc/ssl/certs/ca-certificates.crt") {
			t.Errorf("%s: top layer %v: want the binary, and the base's CA bundle left alone", src, names)
		}
	}
}

func TestBaseErrors(t *testing.T) {
	t.Parallel()
	if _, err := image.LoadBase(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing base: no error")
	}
	junk := filepath.Join(t.TempDir(), "junk.tar")
	os.WriteFile(junk, []byte("not a tarball"), 0o644)
	if _, err := image.LoadBase(junk); err == nil || !strings.Contains(err.Error(), "not an image tarball") {
		t.Errorf("junk base: %v", err)
	}
	arm := teamImage(t)
	cf, _ := arm.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "arm64"
	arm, _ = mutate.ConfigFile(arm, cf)
	if _, err := image.Build(image.Config{Binary: "/bin/true", Base: arm}); err == nil || !strings.Contains(err.Error(), "linux/arm64") {
		t.Errorf("arm64 base: %v", err)
	}
}
