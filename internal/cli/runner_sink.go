package cli

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/artifact"
	"crawlq/internal/awsx"
	"crawlq/internal/items"
)

// runnerBucket is where a runner with bucket (CRAWLQ_ITEMS_BUCKET: the AWS stack's runners)
// keeps what it writes, through one S3 client: its items under items/ (as the worker Lambda
// does) and its failed rendered pages' files (artifact.Store's blobs, listed in pool). Without
// a bucket both are nil: items and files go to Postgres.
func runnerBucket(ctx context.Context, pool *pgxpool.Pool, bucket string) (items.Sink, *artifact.Store, error) {
	if bucket == "" {
		return nil, nil, nil
	}
	cfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, nil, err
	}
	s3c := s3.NewFromConfig(cfg, awsx.S3Options(cfg)...)
	return items.NewS3Sink(s3c, bucket, "items/"), &artifact.Store{Pool: pool, Blobs: artifact.S3{Client: s3c, Bucket: bucket}}, nil
}
