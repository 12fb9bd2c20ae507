package artifact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/artifact"
	"crawlq/internal/awstest"
	"crawlq/internal/awsx"
	"crawlq/internal/dbtest"
)

var png = []byte("\x89PNG\r\n\x1a\nfake")

// A run keeps at most MaxPages failed pages, however many writers race to keep more (each in
// its own transaction, as separate processes would); the rest are refused with ErrFull. A file
// over MaxFileBytes is not stored whole: the HTML is cut and marked, the screenshot dropped.
func TestKeepIsBoundedPerRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := artifact.Store{Pool: dbtest.Pool(t)}
	const writers = artifact.MaxPages + 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := store.Keep(ctx, artifact.Page{RunID: 7, JobID: int64(100 + i%5), Attempt: 1, URL: fmt.Sprintf("http://127.0.0.1/p/%d", i),
				Err: "status 404", At: time.Now(), Screenshot: png, HTML: []byte("<html>" + strings.Repeat("x", i) + "</html>")})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	var full int
	for err := range errs {
		switch {
		case errors.Is(err, artifact.ErrFull):
			full++
		case err != nil:
			t.Fatal(err)
		}
	}
	kept, err := store.List(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != artifact.MaxPages || full != writers-artifact.MaxPages {
		t.Fatalf("kept %d, refused %d; want %d kept and the other %d refused", len(kept), full, artifact.MaxPages, writers-artifact.MaxPages)
	}
	// Another run has its own bound; a page too large is kept in part.
	info, err := store.Keep(ctx, artifact.Page{RunID: 8, JobID: 1, Attempt: 2, URL: "http://127.0.0.1/big", Err: "timeout", At: time.Now(),
		Screenshot: make([]byte, artifact.MaxFileBytes+1), HTML: bytes.Repeat([]byte("y"), artifact.MaxFileBytes+1)})
	if err != nil {
		t.Fatal(err)
	}
	if info.PNGBytes != 0 || info.HTMLBytes != artifact.MaxFileBytes || !info.Truncated || len(info.Files()) != 1 {
		t.Fatalf("kept %+v; want no screenshot and the HTML cut at %d bytes", info, artifact.MaxFileBytes)
	}
	if _, err := store.Read(ctx, 8, info.Name+".png"); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("read the dropped screenshot: %v; want ErrNotFound", err)
	}
}

// With a bucket, the files are objects under artifacts/runs/<run>/ and the index says where;
// Read fetches them back. Not parallel: awstest.Moto sets process environment variables.
func TestKeepInS3(t *testing.T) {
	awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	client := s3.NewFromConfig(cfg, awsx.S3Options(cfg)...)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("crawlq-items")}); err != nil {
		t.Fatal(err)
	}
	store := artifact.Store{Pool: dbtest.Pool(t), Blobs: artifact.S3{Client: client, Bucket: "crawlq-items"}}
	info, err := store.Keep(ctx, artifact.Page{RunID: 9, JobID: 31, Attempt: 1, URL: "http://127.0.0.1/x", Err: "wait for \"div.product\": timeout",
		At: time.Now(), Screenshot: png, HTML: []byte("<html>seen</html>")})
	if err != nil {
		t.Fatal(err)
	}
	if info.Location != "s3://crawlq-items/artifacts/runs/9/" {
		t.Fatalf("location %q; want the run's prefix of the bucket", info.Location)
	}
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("crawlq-items"), Key: aws.String("artifacts/runs/9/page-31-1.html")})
	if err != nil {
		t.Fatal(err)
	}
	obj.Body.Close()
	if aws.ToString(obj.ContentType) != "text/html; charset=utf-8" {
		t.Fatalf("content type %q", aws.ToString(obj.ContentType))
	}
	for file, want := range map[string][]byte{"page-31-1.png": png, "page-31-1.html": []byte("<html>seen</html>")} {
		got, err := store.Read(ctx, 9, file)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %s: %q, %v; want %q", file, got, err, want)
		}
	}
}
