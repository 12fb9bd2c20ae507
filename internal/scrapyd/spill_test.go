package scrapyd_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/awstest"
	"crawlq/internal/awsx"
	"crawlq/internal/items"
	"crawlq/internal/scrapyd"
)

// On AWS a run's items are in the items bucket when worker Lambdas crawled it, and a
// 12,000-item feed is larger than a function URL answer holds (6 MB). ScrapydWeb's Items page
// and `curl -L -u` get it whole anyway: a 302 to a short-lived S3 link, only with the right
// basic auth, each item once although the sink wrote a batch twice.
func TestLargeItemsThroughFunctionURL(t *testing.T) {
	endpoint := awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	s3c := s3.NewFromConfig(cfg, awsx.S3Options(cfg)...)
	const bucket = "crawlq-items-test"
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	f, srv := newFixtureWith(t, func(c *scrapyd.Config) {
		c.Items = items.Readers{items.PostgresReader{Pool: c.Pool}, items.S3Reader{Client: s3c, Bucket: bucket, Prefix: "items/"}}
		c.Username, c.Password = "u", "p"
	})
	run := scheduleAs(t, f, srv, "big-1")

	const n = 12_000
	pad := strings.Repeat("x", 560)
	sink := items.NewS3Sink(s3c, bucket, "items/")
	var batch []items.Item
	for i := range n {
		batch = append(batch, items.Item{RunID: run, Spider: "demo", Key: fmt.Sprintf("k%05d", i), URL: "http://127.0.0.1/p",
			Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))})
		if len(batch) == 1000 {
			if err := sink.Write(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// A retried write (its reply lost) puts the same items again: at-least-once.
	if err := sink.Write(ctx, []items.Item{{RunID: run, Spider: "demo", Key: "k00007", URL: "http://127.0.0.1/p", Data: json.RawMessage(`{"i":7,"dup":true}`)}}); err != nil {
		t.Fatal(err)
	}

	fu := scrapyd.FunctionURL{Handler: srv.Handler(), Spill: scrapyd.S3Spill{Client: s3c, Bucket: bucket, Prefix: scrapyd.SpillPrefix, Expires: 5 * time.Minute}}
	get := func(auth string) events.LambdaFunctionURLResponse {
		ev := events.LambdaFunctionURLRequest{RawPath: "/items/default/demo/big-1.jl", Headers: map[string]string{}}
		ev.RequestContext.HTTP.Method = "GET"
		if auth != "" {
			ev.Headers["authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(auth))
		}
		res, err := fu.Serve(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := get("u:wrong"); res.StatusCode != http.StatusUnauthorized || res.Headers["Location"] != "" {
		t.Fatalf("wrong password: %d %v; want 401 and no link", res.StatusCode, res.Headers)
	}
	res := get("u:p")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Headers["Location"], endpoint+"/") {
		t.Fatalf("large items: %d %v %.200s; want a 302 to the bucket", res.StatusCode, res.Headers, res.Body)
	}
	// What a client does with the 302: a plain GET of the link (requests and curl -L send no
	// basic auth to another host).
	resp, err := http.Get(res.Headers["Location"])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("GET the link: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	seen := map[int]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	size := 0
	for sc.Scan() {
		size += len(sc.Bytes()) + 1
		var it struct {
			I   int  `json:"i"`
			Dup bool `json:"dup"`
		}
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil || it.Dup || seen[it.I] {
			t.Fatalf("line %q: %v (a duplicate or not an item)", sc.Text(), err)
		}
		seen[it.I] = true
	}
	if err := sc.Err(); err != nil || len(seen) != n || size <= scrapyd.MaxFunctionURLAnswer {
		t.Fatalf("the feed through the link: %d items (want %d), %d bytes (want more than %d), %v", len(seen), n, size, scrapyd.MaxFunctionURLAnswer, err)
	}
	// Without a Spill the same answer is the 413 that says where else to read it.
	noSpill := scrapyd.FunctionURL{Handler: srv.Handler()}
	ev := events.LambdaFunctionURLRequest{RawPath: "/items/default/demo/big-1.jl", Headers: map[string]string{"authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))}}
	ev.RequestContext.HTTP.Method = "GET"
	if res, err := noSpill.Serve(ctx, ev); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("without a spill: %d %v; want 413", res.StatusCode, err)
	}
}

// scheduleAs schedules the demo spider under jobid through srv (basic auth u:p) and returns
// its run id.
func scheduleAs(t *testing.T, f *fixture, srv *scrapyd.Server, jobid string) int64 {
	t.Helper()
	ev := events.LambdaFunctionURLRequest{RawPath: "/schedule.json", Body: "project=default&spider=demo&base_url=http%3A%2F%2F127.0.0.1%3A9&jobid=" + jobid,
		Headers: map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))}}
	ev.RequestContext.HTTP.Method = "POST"
	res, err := scrapyd.ServeFunctionURL(context.Background(), srv.Handler(), ev)
	if err != nil || !strings.Contains(res.Body, `"ok"`) {
		t.Fatalf("schedule %s: %+v %v", jobid, res, err)
	}
	id, err := f.store.JobIDTaken(context.Background(), jobid)
	if err != nil || id == 0 {
		t.Fatalf("job %s: run %d, %v", jobid, id, err)
	}
	return id
}
