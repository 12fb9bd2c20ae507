// Command crawlq-image writes the runner's container image as a tarball without a Docker daemon
// (see internal/image); `make image` runs it.
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
	flag.Parse()
	img, err := image.Build(image.Config{Binary: *bin, CACerts: *ca})
	if err == nil {
		err = image.WriteTarball(img, *tag, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crawlq-image:", err)
		os.Exit(1)
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s (%s, %s)\n", *out, *tag, d)
}
