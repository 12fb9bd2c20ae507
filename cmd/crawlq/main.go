// Command crawlq is the crawlq command line: schema migrations, jobs, stats, workers, spiders,
// benchmarks, the local stack and deployment. Run `crawlq --help` for the commands.
package main

import (
	"context"
	"os"

	"crawlq/internal/cli"
	"crawlq/internal/envconfig"
	"crawlq/internal/gctune"
)

func main() {
	gctune.Apply(envconfig.GC(envconfig.New(os.Getenv)), os.ReadFile) // workers and benches: see the package comment
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{}))
}
