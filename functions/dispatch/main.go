// Command dispatch is the crawlq-dispatch Lambda function: one dispatcher tick per invocation
// (see internal/dispatch).
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"crawlq/internal/dispatch"
	"crawlq/internal/envconfig"
	"crawlq/internal/lambdafn"
)

func main() {
	deps, err := lambdafn.Setup(context.Background(), envconfig.Dispatch, nil, 4)
	if err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	runners, err := envconfig.ECSLauncher(envconfig.New(os.Getenv), ecs.NewFromConfig(deps.AWS))
	if err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	cfg, err := deps.DispatchConfig(awslambda.NewFromConfig(deps.AWS), runners)
	if err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	if err := deps.RouteCrawlQueue(&cfg, runners); err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	dp, err := dispatch.New(cfg)
	if err != nil {
		log.Fatalf("crawlq-dispatch: %v", err)
	}
	lambda.Start(lambdafn.Dispatch(dp))
}
