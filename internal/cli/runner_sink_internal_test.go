package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/artifact"
	"crawlq/internal/awstest"
	"crawlq/internal/awsx"
	"crawlq/internal/items"
)

// The runner's items go to the bucket CRAWLQ_ITEMS_BUCKET names, where the Scrapyd API's
// S3Reader finds them (moto stands in for S3), and its failed pages' files to the same bucket;
// without a bucket, both to Postgres (a nil sink and a nil store).
func TestRunnerSink(t *testing.T) {
	awstest.Moto(t)
	ctx := context.Background()
	if s, a, err := runnerBucket(ctx, nil, ""); s != nil || a != nil || err != nil {
		t.Fatalf("no bucket: sink %v, artifacts %v (%v), want nil: Postgres", s, a, err)
	}
	cfg := awstest.Config(t)
	s3c := s3.NewFromConfig(cfg, awsx.S3Options(cfg)...)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("runner-items")}); err != nil {
		t.Fatal(err)
	}
	sink, arts, err := runnerBucket(ctx, nil, "runner-items")
	if err != nil || sink == nil || sink.Name() != "s3" {
		t.Fatalf("bucket: sink %v (%v), want the S3 sink", sink, err)
	}
	if arts == nil {
		t.Fatal("bucket: no artifact store, want one in S3 bucket runner-items")
	}
	if b, ok := arts.Blobs.(artifact.S3); !ok || b.Bucket != "runner-items" {
		t.Fatalf("bucket: artifacts kept in %#v, want S3 bucket runner-items", arts.Blobs)
	}
	if err := sink.Write(ctx, []items.Item{{RunID: 7, Spider: "demo", Key: "k1", URL: "https://example.com/1", Data: []byte(`{"title":"one"}`)}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := items.S3Reader{Client: s3c, Bucket: "runner-items", Prefix: "items/"}.WriteRun(ctx, &out, 7)
	if err != nil || n != 1 || out.String() != "{\"title\":\"one\"}\n" {
		t.Errorf("read back %d items %q (%v), want the one written", n, out.String(), err)
	}
}
