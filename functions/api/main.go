// Command api is the crawlq-api Lambda function: Scrapyd-style actions as JSON payloads (see
// internal/api) and, behind a function URL, the Scrapyd-compatible HTTP API (internal/scrapyd).
package main

import (
	"context"
	"log"
	"os"
	_ "time/tzdata" // addschedule validates timezones; provided.al2023 has no zoneinfo

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"crawlq/internal/api"
	"crawlq/internal/lambdafn"
	"crawlq/internal/scrapyd"
)

func main() {
	ctx := context.Background()
	deps, err := lambdafn.Setup(ctx, nil, 4)
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	a, err := api.New(deps.APIConfig(awslambda.NewFromConfig(deps.AWS)))
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	http := scrapyd.Unavailable("the Scrapyd API needs credentials: set CRAWLQ_SCRAPYD_SECRET_ARN")
	user, pass, err := scrapyd.Credentials(ctx, os.Getenv, &deps.AWS)
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	if user != "" {
		srv, err := scrapyd.New(scrapyd.Config{API: a, Store: deps.Control.Store, Pool: deps.Pool, RunLog: deps.RunLog(),
			Username: user, Password: pass, MaxUploadBytes: api.MaxAddVersionBytes, Logger: deps.Logger})
		if err != nil {
			log.Fatalf("crawlq-api: %v", err)
		}
		http = srv.Handler()
	}
	lambda.Start(scrapyd.LambdaHandler(http, lambdafn.API(a)))
}
