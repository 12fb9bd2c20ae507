// Package awsx loads the AWS SDK configuration every crawlq component shares.
//
// All clients honour AWS_ENDPOINT_URL (the SDK reads it itself), so the same code talks to
// AWS, LocalStack or moto. Against an emulator S3 needs path-style addressing, which
// S3Options turns on whenever an endpoint override is present.
package awsx

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Load returns the default AWS configuration (environment, shared files, instance role).
// Region defaults to us-east-1 when nothing sets it, so local runs need no set-up.
func Load(ctx context.Context) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}

// Emulated reports whether AWS_ENDPOINT_URL points the SDK at an emulator.
func Emulated() bool { return os.Getenv("AWS_ENDPOINT_URL") != "" }

// S3Options returns the S3 client options crawlq uses: path-style addressing under an emulator.
func S3Options() []func(*s3.Options) {
	if !Emulated() {
		return nil
	}
	return []func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = true }}
}
