package cli

import (
	"context"
	"flag"
	"fmt"

	"crawlq/internal/image"
)

// imageCmd is `crawlq image`: the runner image as a tarball, on scratch or on a team's image.
func imageCmd() *Command {
	return &Command{
		Name: "image", Synopsis: "build the runner image (optionally on your own base image) as a tarball", Usage: "[--base DIR|TAR] [--binary PATH] [--out PATH]",
		Help: `Writes the ECS runner's container image as an image tarball, without a Docker daemon: a layer
holding the static linux/amd64 crawlq binary (--binary; build it with
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o build/linux-amd64/crawlq ./cmd/crawlq), a CA
bundle and /tmp, with "/crawlq runner" as the entrypoint.

With --base, the layer goes onto your team's image (an OCI image layout directory, or an image
tarball such as docker save writes); its layers, environment, user and working directory are
kept, so command spiders find your interpreters and libraries, and the CA bundle goes to
/etc/crawlq/ so the base's own stays. Push the tarball to a registry and deploy with
--var runner_image=REF (crawlq deploy pushes build/runner-image.tar to the stack's ECR itself).
"make image BASE=..." does the same.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			bin := fs.String("binary", "build/linux-amd64/crawlq", "linux/amd64 static crawlq binary")
			out := fs.String("out", "build/runner-image.tar", "image tarball to write")
			tag := fs.String("tag", "crawlq-runner:latest", "image reference recorded in the tarball")
			ca := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to put in the image")
			base := fs.String("base", "", "base image: an OCI layout directory or an image tarball (default: scratch)")
			return func(ctx context.Context, args []string) error {
				cfg := image.Config{Binary: *bin, CACerts: *ca}
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
