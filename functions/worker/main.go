// Command worker is the crawlq-worker Lambda function: it works one queue until its deadline
// (see lambdafn.Deps.Worker).
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"crawlq/internal/gctune"
	"crawlq/internal/lambdafn"
)

func main() {
	gctune.Apply(os.Getenv, os.ReadFile)
	deps, err := lambdafn.Setup(context.Background(), nil, 12)
	if err != nil {
		log.Fatalf("crawlq-worker: %v", err)
	}
	lambda.Start(deps.Worker(lambdafn.WorkerOptions{ItemsBucket: os.Getenv("CRAWLQ_ITEMS_BUCKET")}))
}
