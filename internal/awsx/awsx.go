// Package awsx loads the AWS SDK configuration every crawlq component shares.
//
// All clients honour AWS_ENDPOINT_URL (the SDK reads it into the config's BaseEndpoint), so the
// same code talks to AWS, LocalStack or moto. Against an emulator S3 needs path-style
// addressing, which S3Options turns on whenever a config has an endpoint override.
package awsx

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Load returns the default AWS configuration (environment, shared files, instance role), as the
// SDK reads it. Region defaults to us-east-1 when the environment sets none, so local runs need
// no set-up.
func Load(ctx context.Context) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{}
	if envCfg, err := config.NewEnvConfig(); err == nil && envCfg.Region == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}

// Emulated reports whether cfg points the SDK at an emulator (AWS_ENDPOINT_URL).
func Emulated(cfg aws.Config) bool { return aws.ToString(cfg.BaseEndpoint) != "" }

// S3Options returns the S3 client options crawlq uses with cfg: path-style addressing under an
// emulator.
func S3Options(cfg aws.Config) []func(*s3.Options) {
	if !Emulated(cfg) {
		return nil
	}
	return []func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = true }}
}
