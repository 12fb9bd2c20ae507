package artifact

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Prefix is where a run's artifacts are in the bucket: Prefix + "runs/<run>/".
const Prefix = "artifacts/"

// S3 keeps artifacts' files in a bucket under artifacts/runs/<run>/ (the runner role may write
// there and nowhere else of the bucket). Build Client with awsx.Load and awsx.S3Options.
type S3 struct {
	Client *s3.Client
	Bucket string
}

// Put implements Blobs.
func (b S3) Put(ctx context.Context, runID int64, file, contentType string, data []byte) (string, error) {
	dir := fmt.Sprintf("%sruns/%d/", Prefix, runID)
	if _, err := b.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(dir + file),
		Body: bytes.NewReader(data), ContentType: aws.String(contentType)}); err != nil {
		return "", fmt.Errorf("put s3://%s/%s%s: %w", b.Bucket, dir, file, err)
	}
	return "s3://" + b.Bucket + "/" + dir, nil
}

// Get implements Blobs. location is s3://bucket/dir/, of any bucket (the one the runner wrote).
func (b S3) Get(ctx context.Context, location, file string) ([]byte, error) {
	bucket, dir, ok := strings.Cut(strings.TrimPrefix(location, "s3://"), "/")
	if !ok || !strings.HasPrefix(location, "s3://") {
		return nil, fmt.Errorf("artifact location %q is not s3://bucket/prefix/", location)
	}
	out, err := b.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(dir + file)})
	if err != nil {
		return nil, fmt.Errorf("get %s%s: %w", location, file, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("get %s%s: %w", location, file, err)
	}
	return data, nil
}
