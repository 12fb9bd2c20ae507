package cli

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/awsx"
	"crawlq/internal/items"
)

// runnerSink is where a runner puts items: the S3 sink on bucket under items/ (the AWS stack's
// runners, as the worker Lambda does), or nil, the Postgres sink, without a bucket.
func runnerSink(ctx context.Context, bucket string) (items.Sink, error) {
	if bucket == "" {
		return nil, nil
	}
	cfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, err
	}
	return items.NewS3Sink(s3.NewFromConfig(cfg, awsx.S3Options(cfg)...), bucket, "items/"), nil
}
