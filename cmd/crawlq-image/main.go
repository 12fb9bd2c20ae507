// Command crawlq-image writes the runner's container image as a tarball without a Docker daemon
// (see internal/image); `make image` runs it, `make image BASE=path` layers the runner onto a
// team's image (an OCI layout directory or an image tarball).
package main

import (
	"flag"
	"fmt"
	"os"

	"crawlq/internal/image"
)

func main() {
	bin := flag.String("binary", "build/linux-amd64/crawlq", "linux/amd64 static crawlq binary")
	out := flag.String("out", "build/runner-image.tar", "image tarball to write")
	tag := flag.String("tag", "crawlq-runner:latest", "image reference recorded in the tarball")
	ca := flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to put in the image")
	base := flag.String("base", "", "base image to layer the runner onto: an OCI layout directory or an image tarball (default: scratch)")
	flag.Parse()
	if err := run(*bin, *out, *tag, *ca, *base); err != nil {
		fmt.Fprintln(os.Stderr, "crawlq-image:", err)
		os.Exit(1)
	}
}

func run(bin, out, tag, ca, base string) error {
	cfg := image.Config{Binary: bin, CACerts: ca}
	if base != "" {
		b, err := image.LoadBase(base)
		if err != nil {
			return err
		}
		cfg.Base = b
	}
	img, err := image.Build(cfg)
	if err != nil {
		return err
	}
	if err := image.WriteTarball(img, tag, out); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s (%s, %s)\n", out, tag, d)
	return nil
}
