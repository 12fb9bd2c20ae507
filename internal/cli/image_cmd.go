package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"crawlq/internal/image"
)

// imageCmd is `crawlq image`: the runner image as a tarball, on scratch or on a team's image.
func imageCmd() *Command {
	return &Command{
		Name: "image", Synopsis: "build the runner image (optionally on your own base image) as a tarball", Usage: "[--base DIR|TAR | --rootfs TAR | --chromium] [--binary PATH] [--out PATH]",
		Help: `Writes the ECS runner's container image as an image tarball, without a Docker daemon: a layer
holding the static linux/amd64 crawlq binary (--binary; build it with
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o build/linux-amd64/crawlq ./cmd/crawlq), a CA
bundle and /tmp, with "/crawlq runner" as the entrypoint.

With --base, the layer goes onto your team's image (an OCI image layout directory, or an image
tarball such as docker save writes); its layers, environment, user and working directory are
kept, so command spiders find your interpreters and libraries, and the CA bundle goes to
/etc/crawlq/ so the base's own stays. Push the tarball to a registry and deploy with
--var runner_image=REF (crawlq deploy pushes build/runner-image.tar to the stack's ECR itself).
"make image BASE=..." does the same.

For spiders with render: browser the runner needs Chromium: --chromium builds a Debian root file
system holding Debian's chromium with mmdebstrap (apt-get install mmdebstrap; it downloads the
packages from --mirror, as root) into --rootfs (default build/chromium-rootfs.tar, reused when it
exists), puts the runner layer on it and checks the image has Chromium. --rootfs TAR alone uses
an existing root file system tarball as the base; --base with --chromium checks your image has
Chromium.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			bin := fs.String("binary", "build/linux-amd64/crawlq", "linux/amd64 static crawlq binary")
			out := fs.String("out", "build/runner-image.tar", "image tarball to write")
			tag := fs.String("tag", "crawlq-runner:latest", "image reference recorded in the tarball")
			ca := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to put in the image")
			base := fs.String("base", "", "base image: an OCI layout directory or an image tarball (default: scratch)")
			chromium := fs.Bool("chromium", false, "the image must hold Chromium (render: browser); without --base, build a Debian root file system with it by mmdebstrap")
			rootfs := fs.String("rootfs", "", "root file system tarball as the base (with --chromium: where mmdebstrap writes it, default build/chromium-rootfs.tar)")
			mirror := fs.String("mirror", "", "Debian mirror for --chromium (default mmdebstrap's)")
			return func(ctx context.Context, args []string) error {
				cfg := image.Config{Binary: *bin, CACerts: *ca, RequireChromium: *chromium}
				if *base != "" && *rootfs != "" {
					return usageErr("--base and --rootfs both name the base; give one")
				}
				if *chromium && *base == "" {
					if *rootfs == "" {
						*rootfs = "build/chromium-rootfs.tar"
					}
					if err := buildRootfs(ctx, env, image.RootfsRecipe{Out: *rootfs, Mirror: *mirror}); err != nil {
						return err
					}
				}
				if *rootfs != "" {
					b, err := image.LoadRootfs(*rootfs)
					if err != nil {
						return usageErr("--rootfs: %v", err)
					}
					cfg.Base = b
				}
				if *base != "" {
					b, err := image.LoadBase(*base)
					if err != nil {
						return usageErr("--base: %v", err)
					}
					cfg.Base = b
				}
				img, err := image.Build(cfg)
				if err != nil {
					return err
				}
				if err := image.WriteTarball(img, *tag, *out); err != nil {
					return err
				}
				d, _ := img.Digest()
				fmt.Fprintf(env.Stdout, "wrote %s (%s, %s)\n", *out, *tag, d)
				return nil
			}
		},
	}
}

// buildRootfs runs mmdebstrap for r unless r.Out exists.
func buildRootfs(ctx context.Context, env *Env, r image.RootfsRecipe) error {
	if _, err := os.Stat(r.Out); err == nil {
		fmt.Fprintf(env.Stderr, "using the root file system %s (remove it to build it again)\n", r.Out)
		return nil
	}
	args, err := r.Args()
	if err != nil {
		return err
	}
	bin, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return fmt.Errorf("--chromium: mmdebstrap not found (apt-get install mmdebstrap), or give --rootfs TAR or --base IMAGE with Chromium: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(r.Out), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "building %s: mmdebstrap %s\n", r.Out, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = env.Stderr, env.Stderr
	if err := cmd.Run(); err != nil {
		os.Remove(r.Out) // a partial tarball would be taken for a built one next time
		return fmt.Errorf("--chromium: mmdebstrap: %w", err)
	}
	return nil
}
