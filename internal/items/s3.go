package items

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/clock"
)

// S3Sink writes each batch as gzip'd JSON Lines objects, one object per run in the batch.
//
// S3 has no conditional "insert unless the key exists" across objects, so this sink is
// at-least-once, not idempotent: a retried page (or a retried sink write whose reply was
// lost) writes a second object holding the same item keys. Consumers must dedup by
// (run, key), e.g. keep the first line seen per key. Objects are named
// <prefix>runs/<run id>/<unix-nanos>-<random>.jsonl.gz, so listing a run's prefix in
// name order is roughly write order.
type S3Sink struct {
	client *s3.Client
	bucket string
	prefix string
}

// NewS3Sink returns a sink writing to bucket under prefix (e.g. "items/"; may be empty).
// Build client with awsx.Load and awsx.S3Options so that it works under an emulator.
func NewS3Sink(client *s3.Client, bucket, prefix string) Sink {
	return &S3Sink{client: client, bucket: bucket, prefix: prefix}
}

// Name implements Sink.
func (s *S3Sink) Name() string { return "s3" }

// s3Line is one line of an object. Data stays raw, so the item's JSON is copied as is.
type s3Line struct {
	Key    string          `json:"key"`
	URL    string          `json:"url"`
	Spider string          `json:"spider"`
	Data   json.RawMessage `json:"data"`
}

// Write puts one object per run in batch. If a later put fails, earlier ones stay and
// the retry writes them again (at-least-once; see S3Sink).
func (s *S3Sink) Write(ctx context.Context, batch []Item) error {
	byRun := map[int64][]*Item{}
	for i := range batch {
		byRun[batch[i].RunID] = append(byRun[batch[i].RunID], &batch[i])
	}
	runs := make([]int64, 0, len(byRun))
	for r := range byRun {
		runs = append(runs, r)
	}
	slices.Sort(runs)
	for _, run := range runs {
		body, err := encodeJSONLinesGzip(byRun[run])
		if err != nil {
			return err
		}
		key, err := s.objectKey(run)
		if err != nil {
			return err
		}
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:      aws.String(s.bucket),
			Key:         aws.String(key),
			Body:        bytes.NewReader(body),
			ContentType: aws.String("application/gzip"),
		})
		if err != nil {
			return fmt.Errorf("put s3://%s/%s: %w", s.bucket, key, err)
		}
	}
	return nil
}

func (s *S3Sink) objectKey(run int64) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make object name: %w", err)
	}
	return s.prefix + "runs/" + strconv.FormatInt(run, 10) + "/" +
		strconv.FormatInt(clock.Real().Now().UnixNano(), 10) + "-" + hex.EncodeToString(b) + ".jsonl.gz", nil
}

func encodeJSONLinesGzip(items []*Item) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw) // Encode ends each value with a newline: JSON Lines
	enc.SetEscapeHTML(false)
	for _, it := range items {
		if err := enc.Encode(s3Line{Key: it.Key, URL: it.URL, Spider: it.Spider, Data: it.Data}); err != nil {
			return nil, fmt.Errorf("encode item %q: %w", it.Key, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip items: %w", err)
	}
	return buf.Bytes(), nil
}
