// Command migrate is the crawlq-migrate Lambda function: the deploy's database step, as the
// master user (see internal/dbsetup). Terraform invokes it on each deploy whose code changed.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"crawlq/internal/awsx"
	"crawlq/internal/dbsetup"
)

func main() {
	ctx := context.Background()
	awsCfg, err := awsx.Load(ctx)
	if err != nil {
		log.Fatalf("crawlq-migrate: %v", err)
	}
	cfg, err := dbsetup.FromEnv(ctx, os.Getenv, awsCfg)
	if err != nil {
		log.Fatalf("crawlq-migrate: %v", err)
	}
	lambda.Start(dbsetup.Handler(cfg))
}
