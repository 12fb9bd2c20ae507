package queue_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/queue"
)

// The hot paths, for `go test -bench . ./internal/queue` (make bench runs the end-to-end figures).

func benchJobs(n int) []queue.EnqueueParams {
	ps := make([]queue.EnqueueParams, n)
	for i := range ps {
		ps[i] = queue.EnqueueParams{Queue: "b", Kind: "noop", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
	}
	return ps
}

// BenchmarkEnqueueMany inserts batches of 1000 plain jobs (the COPY path).
func BenchmarkEnqueueMany(b *testing.B) {
	c := queue.New(dbtest.Pool(b), queue.Config{})
	ps := benchJobs(1000)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ps))/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueUnique inserts batches of 1000 jobs with unique keys, half of them duplicates in
// replace mode (the upsert path).
func BenchmarkEnqueueUnique(b *testing.B) {
	c := queue.New(dbtest.Pool(b), queue.Config{})
	ps := benchJobs(1000)
	ctx := context.Background()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		for j := range ps {
			ps[j].UniqueKey = "k" + strconv.Itoa((i*len(ps)+j)/2)
			ps[j].OnDuplicate = queue.Replace
			ps[j].Delay = time.Hour
		}
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N*len(ps))/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimComplete claims and completes batches of 1000 jobs.
func BenchmarkClaimComplete(b *testing.B) {
	c := queue.New(dbtest.Pool(b), queue.Config{})
	ctx := context.Background()
	ps := benchJobs(1000)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		jobs, err := c.Claim(ctx, queue.ClaimParams{Queue: "b", Limit: 1000, Lease: time.Minute})
		if err != nil || len(jobs) != 1000 {
			b.Fatalf("claim: %d %v", len(jobs), err)
		}
		leases := make([]queue.Lease, len(jobs))
		for i, j := range jobs {
			leases[i] = j.Lease()
		}
		if lost, err := c.CompleteMany(ctx, leases); err != nil || len(lost) > 0 {
			b.Fatal(lost, err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
}
