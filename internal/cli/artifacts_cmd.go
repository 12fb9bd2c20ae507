package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/artifact"
	"crawlq/internal/awsx"
	"crawlq/internal/node"
)

// artifactsCmd is `crawlq artifacts RUN [--save DIR]`: what a run's failed rendered pages looked like.
func artifactsCmd() *Command {
	return &Command{
		Name: "artifacts", Synopsis: "list (--save: write out) the screenshots and HTML of a run's failed rendered pages", Usage: "RUN [--save DIR]", Args: one("RUN"),
		Help: fmt.Sprintf(`Lists what a run's failed rendered pages (render: browser) looked like when they failed: for
each, its name (page-<job>-<n>, the page job's nth kept failure), when, its attempt, its URL, its
files (name.png, the screenshot; name.html, the DOM as it was) with their sizes, and why it
failed. The run's log (crawlq logs RUN) names them on the line of each failure.

--save DIR writes the files into DIR (created if missing) and prints their paths.

A run keeps at most %d failed pages, each file at most %d KiB (a longer HTML is cut, a larger
screenshot is not kept); a failure past the bound is said once in the run's log. They are in
the database (crawlq local, runners without a bucket) or, on a runner with $CRAWLQ_ITEMS_BUCKET
(the AWS stack), in that bucket under %sruns/RUN/, read with the machine's AWS credentials.`,
			artifact.MaxPages, artifact.MaxFileBytes>>10, artifact.Prefix),
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			save := fs.String("save", "", "write the files into this directory")
			return func(ctx context.Context, args []string) error {
				id, err := parseRunID(args)
				if err != nil {
					return err
				}
				return pg.withNode(ctx, "", func(n *node.Node) error {
					if _, err := n.Crawler.Get(ctx, id); err != nil {
						return err
					}
					store := artifact.Store{Pool: n.Crawler.Pool()}
					kept, err := store.List(ctx, id)
					if err != nil {
						return err
					}
					if len(kept) == 0 {
						fmt.Fprintf(env.Stdout, "run %d kept no failed rendered page\n", id)
						return nil
					}
					for _, k := range kept {
						if k.Location != "" && store.Blobs == nil && *save != "" {
							cfg, err := awsx.Load(ctx)
							if err != nil {
								return err
							}
							store.Blobs = artifact.S3{Client: s3.NewFromConfig(cfg, awsx.S3Options(cfg)...)}
						}
						var files []string
						for _, f := range k.Files() {
							size := k.PNGBytes
							if strings.HasSuffix(f, ".html") {
								size = k.HTMLBytes
							}
							files = append(files, fmt.Sprintf("%s (%d bytes)", f, size))
						}
						if k.Truncated {
							files = append(files, "the HTML cut")
						}
						where := ""
						if k.Location != "" {
							where = " in " + k.Location
						}
						fmt.Fprintf(env.Stdout, "%s  %s  attempt %d  %s\n  files%s: %s\n  failed: %s\n", k.Name, k.At.UTC().Format("2006-01-02 15:04:05.000"),
							k.Attempt, k.URL, where, strings.Join(files, ", "), k.Err)
						if *save == "" {
							continue
						}
						if err := os.MkdirAll(*save, 0o755); err != nil {
							return err
						}
						for _, f := range k.Files() {
							data, err := store.Read(ctx, id, f)
							if err != nil {
								return err
							}
							p := filepath.Join(*save, f)
							if err := os.WriteFile(p, data, 0o644); err != nil {
								return err
							}
							fmt.Fprintf(env.Stdout, "  saved %s\n", p)
						}
					}
					return nil
				})
			}
		},
	}
}
