package items

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/awstest"
	"crawlq/internal/awsx"
)

// Not parallel: awstest.Moto sets process environment variables.
func TestS3Sink(t *testing.T) {
	awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	client := s3.NewFromConfig(cfg, awsx.S3Options(cfg)...)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("items")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	p := newPipeline(t, NewS3Sink(client, "items", "crawl/"), Config{BatchSize: 25})

	// Two runs in one batch become two objects; the retried page shows the at-least-once
	// contract: its keys appear in a second object.
	run10, run11 := page(10, 0, 0, 30), page(11, 0, 0, 4)
	run10[0].Data = json.RawMessage(`{"title":"caf\u00e9 <b>&","n":[1,2]}`)
	if err := p.Write(ctx, append(append([]Item{}, run10...), run11...)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := p.Write(ctx, run11[:2]); err != nil {
		t.Fatalf("Write retry: %v", err)
	}

	name := regexp.MustCompile(`^crawl/runs/(10|11)/\d{19}-[0-9a-f]{16}\.jsonl\.gz$`)
	lines := map[string][]s3Line{} // by run directory
	out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("items")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		key := aws.ToString(o.Key)
		m := name.FindStringSubmatch(key)
		if m == nil {
			t.Fatalf("object name %q does not follow <prefix>runs/<run>/<nanos>-<random>.jsonl.gz", key)
		}
		obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("items"), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(obj.Body)
		if err != nil {
			t.Fatalf("%s is not gzip: %v", key, err)
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
				t.Fatalf("%s: line %q: %v", key, sc.Text(), err)
			}
			if len(raw) != 4 || raw["key"] == nil || raw["url"] == nil || raw["spider"] == nil || raw["data"] == nil {
				t.Fatalf("%s: line %s: want exactly key, url, spider, data", key, sc.Text())
			}
			var l s3Line
			_ = json.Unmarshal(sc.Bytes(), &l)
			lines[m[1]] = append(lines[m[1]], l)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, zr)
		obj.Body.Close()
	}
	if got := len(lines["10"]); got != 30 {
		t.Errorf("run 10: %d lines, want 30", got)
	}
	if got := len(lines["11"]); got != 6 {
		t.Errorf("run 11: %d lines, want 4 + 2 re-sent", got)
	}
	first := lines["10"]
	var data map[string]any
	for _, l := range first {
		if l.Key == run10[0].Key {
			if err := json.Unmarshal(l.Data, &data); err != nil || data["title"] != "café <b>&" || l.Spider != "books" || !strings.HasPrefix(l.URL, "http://") {
				t.Errorf("round trip of %s: %+v (%v)", l.Key, l, err)
			}
		}
	}
	if data == nil {
		t.Errorf("key %s not found in run 10's objects", run10[0].Key)
	}
}
