// Command metrics is the crawlq-metrics Lambda function: queue and spider statistics as
// CloudWatch Embedded Metric Format lines on stdout (see internal/metrics).
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"crawlq/internal/envconfig"
	"crawlq/internal/lambdafn"
)

func main() {
	deps, err := lambdafn.Setup(context.Background(), envconfig.Metrics, nil, 2)
	if err != nil {
		log.Fatalf("crawlq-metrics: %v", err)
	}
	lambda.Start(deps.Metrics(os.Stdout, deps.Config.MetricsNamespace))
}
