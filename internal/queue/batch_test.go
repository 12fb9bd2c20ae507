package queue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/queue"
)

// The batched variants go out with the caller's own statements in one round trip and report
// what the unbatched ones do: lost leases, new ids, exact counts.
func TestBatchedCompleteAndEnqueue(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	for range 3 {
		enqueue(t, c, queue.EnqueueParams{})
	}
	jobs := claim(t, c, 3, time.Minute)
	// Job 0 changes hands: its old lease is stale.
	if _, err := c.Release(ctx, []queue.Lease{jobs[0].Lease()}); err != nil {
		t.Fatal(err)
	}
	again := claim(t, c, 1, time.Minute)
	if len(again) != 1 || again[0].ID != jobs[0].ID {
		t.Fatalf("reclaim: %+v", again)
	}
	leases := []queue.Lease{jobs[0].Lease(), jobs[1].Lease(), jobs[2].Lease()}
	ps := []queue.EnqueueParams{{Queue: "q", Kind: "child", ParentID: jobs[1].ID}, {Queue: "q", Kind: "child", Priority: 3}}

	// A lost lease is reported once the results are read; the caller rolls back.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	var lost []int64
	c.CompleteManyBatch(b, leases, &lost)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lost) != fmt.Sprint([]int64{jobs[0].ID}) {
		t.Fatalf("lost %v, want [%d]", lost, jobs[0].ID)
	}
	tx.Rollback(ctx)

	// The held leases complete and the children are inserted in one implicit transaction.
	b = &pgx.Batch{}
	lost = nil
	c.CompleteManyBatch(b, leases[1:], &lost)
	out := make([]queue.EnqueueResult, len(ps))
	if err := c.EnqueueManyBatch(b, ps, out); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if len(lost) != 0 {
		t.Fatalf("lost %v", lost)
	}
	for i, r := range out {
		got, err := c.Get(ctx, r.ID)
		if err != nil || r.Duplicate || got.Kind != "child" || got.State != queue.StateAvailable || got.ParentID != ps[i].ParentID || got.Priority != ps[i].Priority {
			t.Fatalf("child %d: %+v %+v %v", i, r, got, err)
		}
	}
	for _, j := range jobs[1:] {
		if got, _ := c.Get(ctx, j.ID); got.State != queue.StateSucceeded {
			t.Fatalf("job %d: %s, want succeeded", j.ID, got.State)
		}
	}
	if a, s := actualCounts(t, pool), statCounts(t, c); fmt.Sprint(a) != fmt.Sprint(s) {
		t.Fatalf("counts %v, rows %v", s, a)
	}
}

func TestEnqueueManyBatchRejectsBadInput(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	for name, ps := range map[string][]queue.EnqueueParams{
		"unique key": {{Queue: "q", Kind: "k", UniqueKey: "u"}},
		"no kind":    {{Queue: "q"}},
		"bad queue":  {{Queue: "no spaces", Kind: "k"}},
	} {
		b := &pgx.Batch{}
		err := c.EnqueueManyBatch(b, ps, make([]queue.EnqueueResult, len(ps)))
		if !errors.Is(err, queue.ErrInvalid) || b.Len() != 0 {
			t.Errorf("%s: err %v, %d statements queued; want ErrInvalid and none", name, err, b.Len())
		}
	}
	b := &pgx.Batch{}
	if err := c.EnqueueManyBatch(b, []queue.EnqueueParams{{Queue: "q", Kind: "k"}}, nil); !errors.Is(err, queue.ErrInvalid) || b.Len() != 0 {
		t.Errorf("short results slice: err %v", err)
	}
}
