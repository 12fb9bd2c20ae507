// Command api is the crawlq-api Lambda function: Scrapyd-style actions (see internal/api).
package main

import (
	"context"
	"log"
	_ "time/tzdata" // addschedule validates timezones; provided.al2023 has no zoneinfo

	"github.com/aws/aws-lambda-go/lambda"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"crawlq/internal/api"
	"crawlq/internal/lambdafn"
)

func main() {
	deps, err := lambdafn.Setup(context.Background(), nil, 4)
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	a, err := api.New(deps.APIConfig(awslambda.NewFromConfig(deps.AWS)))
	if err != nil {
		log.Fatalf("crawlq-api: %v", err)
	}
	lambda.Start(lambdafn.API(a))
}
