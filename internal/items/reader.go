package items

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Reader writes every item of a run as JSON Lines (each item's data, one per line): what a
// Scrapyd client reads as the run's feed, from wherever the sink put them.
type Reader interface {
	// WriteRun writes run's items to w and returns how many it wrote. On an error after some
	// were written, the caller must not present what was written as the whole feed.
	WriteRun(ctx context.Context, w io.Writer, run int64) (int, error)
}

// PostgresReader reads the Postgres sink's items in key order with one statement whose rows are
// streamed: memory is one row whatever the run's size, and the run's items are sorted once (they
// are stored a batch to a row, so a page of a keyset read would sort what is left of the run).
type PostgresReader struct{ Pool *pgxpool.Pool }

// writeBuffer is how many bytes of items are written to w at once.
const writeBuffer = 64 << 10

// WriteRun implements Reader.
func (r PostgresReader) WriteRun(ctx context.Context, w io.Writer, run int64) (int, error) {
	sent := 0
	bw := bufio.NewWriterSize(w, writeBuffer)
	err := EachItem(ctx, r.Pool, run, func(it Item) error {
		if _, err := bw.Write(it.Data); err != nil {
			return fmt.Errorf("write items of run %d: %w", run, err)
		}
		if err := bw.WriteByte('\n'); err != nil {
			return fmt.Errorf("write items of run %d: %w", run, err)
		}
		sent++
		return nil
	})
	if err != nil {
		return sent, err
	}
	if err := bw.Flush(); err != nil {
		return sent, fmt.Errorf("write items of run %d: %w", run, err)
	}
	return sent, nil
}

// S3Reader reads what an S3Sink with the same bucket and prefix wrote: a run's objects in
// name order (about write order), each item once. The sink is at-least-once (a retried write
// puts a second object with the same keys), so the reader keeps the first line of each key: its
// memory grows with the run's distinct keys (about 100 bytes each).
type S3Reader struct {
	Client *s3.Client
	Bucket string
	Prefix string
}

// WriteRun implements Reader.
func (r S3Reader) WriteRun(ctx context.Context, w io.Writer, run int64) (int, error) {
	prefix := r.Prefix + "runs/" + strconv.FormatInt(run, 10) + "/"
	seen := map[string]struct{}{}
	sent := 0
	bw := bufio.NewWriterSize(w, 64<<10)
	pages := s3.NewListObjectsV2Paginator(r.Client, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return sent, fmt.Errorf("list s3://%s/%s: %w", r.Bucket, prefix, err)
		}
		for _, obj := range page.Contents {
			n, err := r.writeObject(ctx, bw, aws.ToString(obj.Key), seen)
			sent += n
			if err != nil {
				return sent, err
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return sent, fmt.Errorf("write items of run %d: %w", run, err)
	}
	return sent, nil
}

func (r S3Reader) writeObject(ctx context.Context, w *bufio.Writer, key string, seen map[string]struct{}) (int, error) {
	out, err := r.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
	if err != nil {
		return 0, fmt.Errorf("get s3://%s/%s: %w", r.Bucket, key, err)
	}
	defer out.Body.Close()
	zr, err := gzip.NewReader(out.Body)
	if err != nil {
		return 0, fmt.Errorf("read s3://%s/%s: %w", r.Bucket, key, err)
	}
	dec := json.NewDecoder(zr)
	sent := 0
	for {
		var line s3Line
		if err := dec.Decode(&line); err == io.EOF {
			return sent, nil
		} else if err != nil {
			return sent, fmt.Errorf("read s3://%s/%s: %w", r.Bucket, key, err)
		}
		if _, dup := seen[line.Key]; dup {
			continue
		}
		seen[line.Key] = struct{}{}
		w.Write(line.Data)
		if err := w.WriteByte('\n'); err != nil {
			return sent, fmt.Errorf("write items: %w", err)
		}
		sent++
	}
}

// Readers reads a run's items from each reader in turn: on AWS a run's items are in Postgres
// when runners crawled it and in S3 when worker Lambdas did (a run's pages go one way, so a
// key is in one of them).
type Readers []Reader

// WriteRun implements Reader.
func (rs Readers) WriteRun(ctx context.Context, w io.Writer, run int64) (int, error) {
	sent := 0
	for _, r := range rs {
		n, err := r.WriteRun(ctx, w, run)
		sent += n
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}
