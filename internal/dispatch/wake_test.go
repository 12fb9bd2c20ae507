package dispatch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/testwait"
)

// A Wake from another connection reaches Listen with its runs, a Wake of another schema does not,
// and a listener whose connection is killed comes back and wakes once for what it may have missed.
func TestWakeReachesTheListenerOfItsSchema(t *testing.T) {
	t.Parallel()
	schema, url := dbtest.Schema(t)
	app := "wake_test_" + schema // names this test's connections, to kill only its listener
	pool := dbtest.Open(t, url+"&application_name="+app, 4)
	other := dbtest.Pool(t) // another crawlq schema in the same database
	ctx, cancel := context.WithCancel(context.Background())
	wakes := make(chan []int64, 16)
	done := make(chan error, 1)
	go func() {
		// Ping often: the quiet waits between the test's steps go through the ping path too.
		done <- dispatch.Listen(ctx, dispatch.ListenConfig{Pool: pool, Retry: backoff.Policy{Base: 10 * time.Millisecond}, Ping: 50 * time.Millisecond,
			OnWake: func(_ context.Context, runs []int64) { wakes <- runs }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	})
	next := func(what string) []int64 {
		t.Helper()
		select {
		case r := <-wakes:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake for %s", what)
			return nil
		}
	}
	if r := next("the connection"); r != nil {
		t.Fatalf("first wake: %v, want nil (what changed before listening)", r)
	}
	// The listener pings its quiet connection (its last statement shows it) and goes on
	// listening on it: no reconnection, so no wake.
	testwait.Until(t, "the listener pings its connection", func() bool {
		var pinged int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query = '-- ping'`,
			app).Scan(&pinged); err != nil {
			t.Fatal(err)
		}
		return pinged == 1
	})
	select {
	case r := <-wakes:
		t.Fatalf("a wake (%v) while nothing was sent: the listener reconnected", r)
	default:
	}
	if err := dispatch.Wake(ctx, other, 99); err != nil {
		t.Fatal(err)
	}
	if err := dispatch.Wake(ctx, pool, 7, 8); err != nil {
		t.Fatal(err)
	}
	// Inside a transaction the wake goes out at commit.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatch.Wake(ctx, tx, 9); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for len(got) < 3 {
		got = append(got, next("runs 7, 8 and 9")...)
	}
	if slices.Sort(got); !slices.Equal(got, []int64{7, 8, 9}) {
		t.Fatalf("woken for %v, want [7 8 9] (99 is another schema's)", got)
	}

	// Kill the listening connection: Listen reconnects and wakes once with nil.
	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = $1 AND query IN ('LISTEN `+dispatch.WakeChannel+`', '-- ping') AND pid <> pg_backend_pid()`, app).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("killed %d listening connections, %v; want 1", killed, err)
	}
	for {
		if r := next("the reconnection"); r == nil {
			break
		}
	}
	if err := dispatch.Wake(ctx, pool, 11); err != nil {
		t.Fatal(err)
	}
	for {
		if r := next("run 11 after the reconnection"); slices.Contains(r, 11) {
			break
		}
	}
}
