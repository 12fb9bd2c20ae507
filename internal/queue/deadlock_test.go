package queue_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"crawlq/internal/queue"
)

// A heartbeat and a completion of overlapping leases lock the same rows; statements that lock
// several rows take them in id order, so the two wait for each other instead of deadlocking
// (SQLSTATE 40P01). Each round runs heartbeats over the leases in one order and completions and
// releases over them in other orders at once, and every statement must succeed.
func TestConcurrentHeartbeatAndCompleteDoNotDeadlock(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx := ctxT(t)
	const n = 200
	for round := range 10 {
		ps := make([]queue.EnqueueParams, n)
		for i := range ps {
			ps[i] = queue.EnqueueParams{Queue: "q", Kind: "k"}
		}
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		jobs := claim(t, c, n, time.Minute)
		if len(jobs) != n {
			t.Fatalf("round %d: claimed %d of %d", round, len(jobs), n)
		}
		leases := make([]queue.Lease, n)
		for i, j := range jobs {
			leases[i] = j.Lease()
		}
		reversed := slices.Clone(leases)
		slices.Reverse(reversed)
		shuffled := slices.Clone(leases)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

		var wg sync.WaitGroup
		errs := make(chan error, 64)
		run := func(f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(); err != nil {
					errs <- err
				}
			}()
		}
		for range 4 {
			run(func() error {
				_, err := c.Heartbeat(ctx, reversed, time.Minute)
				return err
			})
		}
		// Completions and releases in halves that overlap the heartbeats' rows from both ends.
		run(func() error { _, err := c.CompleteMany(ctx, shuffled[:n/2]); return err })
		run(func() error { _, err := c.Release(ctx, shuffled[n/2:]); return err })
		run(func() error {
			tx := c.NewTx()
			tx.Complete(reversed[:n/4])
			err := tx.Send(ctx)
			if errors.Is(err, queue.ErrLeaseLost) {
				return nil // completed or released by the others first: nothing committed
			}
			return err
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
				t.Fatalf("round %d: deadlock: %v", round, err)
			}
			t.Fatalf("round %d: %v", round, err)
		}
		if s := stats(t, c); s.Running != 0 {
			t.Fatalf("round %d: %d jobs still running after completing or releasing them all", round, s.Running)
		}
		// Clear the queue for the next round.
		for {
			jobs := claim(t, c, 1000, time.Minute)
			if len(jobs) == 0 {
				break
			}
			ls := make([]queue.Lease, len(jobs))
			for i, j := range jobs {
				ls[i] = j.Lease()
			}
			if _, err := c.CompleteMany(context.WithoutCancel(ctx), ls); err != nil {
				t.Fatal(err)
			}
		}
	}
}
