package scrapyd

import (
	"context"
	"crawlq/internal/clock"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// SpillPrefix is where the api function keeps large answers in the items bucket; the bucket's
// lifecycle rule (terraform/modules/storage) removes them after a day.
const SpillPrefix = "scrapyd-answers/"

// S3Spill keeps a large answer as an object under Prefix and links to it with a presigned GET
// URL valid for Expires (default 15 minutes): the client's own credentials never reach S3, and
// the link is the only way in. The answer is staged in a temporary file first (a function's
// /tmp, 512 MB unless its ephemeral storage is raised), so memory stays small and S3 gets one
// put of a known length.
type S3Spill struct {
	Client  *s3.Client
	Bucket  string
	Prefix  string
	Expires time.Duration
	// Clock names the staged answers by time. Default the wall clock.
	Clock clock.Clock
}

// Keep implements Spill.
func (s S3Spill) Keep(ctx context.Context, contentType string, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp("", "crawlq-answer-*")
	if err != nil {
		return "", fmt.Errorf("stage answer: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := write(f); err != nil {
		return "", fmt.Errorf("stage answer: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", fmt.Errorf("stage answer: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("stage answer: %w", err)
	}
	rnd := make([]byte, 12)
	if _, err := rand.Read(rnd); err != nil {
		return "", fmt.Errorf("name answer: %w", err)
	}
	key := s.Prefix + clock.Or(s.Clock).Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(rnd)
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	_, err = s.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: f, ContentLength: aws.Int64(size), ContentType: aws.String(contentType),
	})
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s: %w", s.Bucket, key, err)
	}
	expires := s.Expires
	if expires <= 0 {
		expires = 15 * time.Minute
	}
	req, err := s3.NewPresignClient(s.Client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)},
		s3.WithPresignExpires(expires))
	if err != nil {
		return "", fmt.Errorf("presign s3://%s/%s: %w", s.Bucket, key, err)
	}
	return req.URL, nil
}
