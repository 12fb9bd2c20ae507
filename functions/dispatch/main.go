// Command dispatch is the crawlq-dispatch Lambda function: one dispatcher tick per invocation
// (see internal/dispatch).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"crawlq/internal/dispatch"
	"crawlq/internal/lambdafn"
)

func main() {
	deps, err := lambdafn.Setup(context.Background(), nil, 4)
	if err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	// The long-crawl queue's runner tasks need internal/ecsrun's Launcher; until it is wired
	// here, dispatch leaves that queue alone (nil launcher).
	cfg, err := deps.DispatchConfig(awslambda.NewFromConfig(deps.AWS), nil)
	if err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	dp, err := dispatch.New(cfg)
	if err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	lambda.Start(lambdafn.Dispatch(dp))
}
