// Command crawlq is the crawlq command line: schema migrations, jobs, stats, workers, spiders,
// benchmarks, the local stack and deployment. Run `crawlq --help` for the commands.
package main

import (
	"context"
	"os"

	"crawlq/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{}))
}
