// Command api is the crawlq-api Lambda function: Scrapyd-style actions as JSON payloads (see
// internal/api) and, behind a function URL, the Scrapyd-compatible HTTP API (internal/scrapyd).
package main

import (
	"context"
	"log"
	_ "time/tzdata" // addschedule validates timezones; provided.al2023 has no zoneinfo

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/api"
	"crawlq/internal/awsx"
	"crawlq/internal/envconfig"
	"crawlq/internal/items"
	"crawlq/internal/lambdafn"
	"crawlq/internal/scrapyd"
)

func main() {
	ctx := context.Background()
	deps, err := lambdafn.Setup(ctx, envconfig.API, nil, 4)
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	a, err := api.New(deps.APIConfig(awslambda.NewFromConfig(deps.AWS)))
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	http := scrapyd.Unavailable("the Scrapyd API needs credentials: set CRAWLQ_SCRAPYD_SECRET_ARN")
	user, pass, err := scrapyd.Credentials(ctx, deps.Config.API.Scrapyd, &deps.AWS)
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	// A run's items are in Postgres (runners) or in the items bucket (worker Lambdas); answers
	// past the function URL's 6 MB are kept in the bucket and the client redirected there.
	var itemReader items.Reader = items.PostgresReader{Pool: deps.Pool}
	var spill scrapyd.Spill
	if bucket := deps.Config.API.ItemsBucket; bucket != "" {
		s3c := s3.NewFromConfig(deps.AWS, awsx.S3Options(deps.AWS)...)
		itemReader = items.Readers{itemReader, items.S3Reader{Client: s3c, Bucket: bucket, Prefix: "items/"}}
		spill = scrapyd.S3Spill{Client: s3c, Bucket: bucket, Prefix: scrapyd.SpillPrefix}
	}
	if user != "" {
		srv, err := scrapyd.New(scrapyd.Config{API: a, Store: deps.Control.Store, Items: itemReader, RunLog: deps.RunLog(),
			Username: user, Password: pass, MaxUploadBytes: api.MaxAddVersionBytes, Logger: deps.Logger})
		if err != nil {
			log.Fatalf("crawlq-api: %v", err)
		}
		http = srv.Handler()
	}
	lambda.Start(scrapyd.LambdaHandler(scrapyd.FunctionURL{Handler: http, Spill: spill}, lambdafn.API(a)))
}
