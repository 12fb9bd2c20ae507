// Command worker is the crawlq-worker Lambda function: it works one queue until its deadline
// (see lambdafn.Deps.Worker).
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"crawlq/internal/envconfig"
	"crawlq/internal/gctune"
	"crawlq/internal/lambdafn"
)

func main() {
	gctune.Apply(envconfig.GC(envconfig.New(os.Getenv)), os.ReadFile)
	deps, err := lambdafn.Setup(context.Background(), envconfig.Worker, nil, 12)
	if err != nil {
		log.Fatalf("crawlq-worker: %v", err)
	}
	lambda.Start(deps.Worker(lambdafn.WorkerOptions{ItemsBucket: deps.Config.Worker.ItemsBucket, ProxyEnv: envconfig.ProxyEnv(os.Environ())}))
}
