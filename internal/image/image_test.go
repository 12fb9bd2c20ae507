package image_test

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"crawlq/internal/image"
)

func TestBuildWriteLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Any small ELF file will do for the layer; the real binary is built by `make image`.
	self := "/bin/true"
	if _, err := os.Stat(self); err != nil {
		t.Fatalf("this test needs %s as a small ELF executable: %v", self, err)
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(image.Config{Binary: self, CACerts: ca})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "runner-image.tar")
	if err := image.WriteTarball(img, "crawlq-runner:test", out); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("crawlq-runner:test")
	loaded, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("load the tarball: %v", err)
	}
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/crawlq runner" || cf.Architecture != "amd64" || cf.OS != "linux" {
		t.Errorf("config: entrypoint %q, platform %s/%s; want /crawlq runner on linux/amd64", cf.Config.Entrypoint, cf.OS, cf.Architecture)
	}
	if cf.Config.User == "" || cf.Config.User == "0" || cf.Config.User == "root" {
		t.Errorf("user %q: the runner should not run as root", cf.Config.User)
	}
	// The tarball's manifest is docker-save's, so compare what it points at: the config.
	want, _ := img.ConfigName()
	if got, _ := loaded.ConfigName(); got != want {
		t.Errorf("config digest after load %s, want %s", got, want)
	}
	layers, err := loaded.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
	st, _ := os.Stat(self)
	if h := files["crawlq"]; h == nil || h.Mode&0o111 == 0 || h.Size != st.Size() {
		t.Errorf("binary entry %+v, want an executable of %d bytes", h, st.Size())
	}
	if files["etc/ssl/certs/ca-certificates.crt"] == nil || files["tmp/"] == nil {
		t.Errorf("layer lacks the CA bundle or /tmp: %v", files)
	}
	// Same inputs, same image: builds are reproducible.
	again, err := image.Build(image.Config{Binary: self, CACerts: ca})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.ConfigName(); d != want {
		t.Errorf("rebuild digest %s, want %s", d, want)
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notELF := filepath.Join(dir, "crawlq")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	for _, c := range []struct {
		cfg  image.Config
		want string
	}{
		{image.Config{}, "Binary is required"},
		{image.Config{Binary: filepath.Join(dir, "missing")}, "read binary"},
		{image.Config{Binary: notELF}, "not an ELF"},
	} {
		if _, err := image.Build(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}
