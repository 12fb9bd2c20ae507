package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/db"
	"crawlq/internal/dbtest"
	"crawlq/internal/queue"
)

// batchCounter counts the statements of the batches a pool sends.
type batchCounter struct{ stmts atomic.Int64 }

func (c *batchCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (c *batchCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *batchCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *batchCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.stmts.Add(1)
}
func (c *batchCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A Tx sends its own statements and nothing else (no BEGIN, no COMMIT: each would be a statement
// for the server to parse and run, two of the three of a crawled page's discovery), and the
// server still runs them as one transaction in every exec mode: a statement that fails leaves
// nothing of the ones before it, and a Tx that succeeds commits all of them.
func TestTxSendsOnlyItsStatementsAsOneTransaction(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	for _, mode := range []string{"exec", "simple", "cache_describe", "cache_statement"} {
		t.Run(mode, func(t *testing.T) {
			ctx := ctxT(t)
			pc, err := db.Config{URL: url, ExecMode: mode, MaxConns: 2}.PoolConfig()
			if err != nil {
				t.Fatal(err)
			}
			counter := &batchCounter{}
			pc.ConnConfig.Tracer = counter
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			c := queue.New(pool, queue.Config{})
			table := pgx.Identifier{"mine_" + mode}.Sanitize()
			if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (n int)`); err != nil {
				t.Fatal(err)
			}
			send := func(lease queue.Lease, last string) error {
				tx := c.NewTx()
				tx.Complete([]queue.Lease{lease})
				out := make([]queue.EnqueueResult, 1)
				if err := tx.Enqueue([]queue.EnqueueParams{{Queue: "stmts_" + mode, Kind: "child"}}, 0, out); err != nil {
					t.Fatal(err)
				}
				tx.Queue(`INSERT INTO ` + table + ` VALUES (1)`)
				tx.Queue(last)
				counter.stmts.Store(0)
				err := tx.Send(ctx)
				if n := counter.stmts.Load(); n != 4 {
					t.Errorf("a Tx of 4 statements sent %d", n)
				}
				return err
			}
			if _, err := c.Enqueue(ctx, queue.EnqueueParams{Queue: "stmts_" + mode, Kind: "parent"}); err != nil {
				t.Fatal(err)
			}
			jobs, err := c.Claim(ctx, queue.ClaimParams{Queue: "stmts_" + mode, Worker: "w", Limit: 1, Lease: time.Minute})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("claim: %v %v", jobs, err)
			}
			rows := func() (mine, children int) {
				t.Helper()
				err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+table+`), (SELECT count(*) FROM crawlq_job WHERE queue = $1 AND kind = 'child')`, "stmts_"+mode).Scan(&mine, &children)
				if err != nil {
					t.Fatal(err)
				}
				return mine, children
			}
			if err := send(jobs[0].Lease(), `SELECT 1/0`); err == nil {
				t.Fatal("a Tx whose last statement fails: no error")
			}
			if got, err := c.Get(ctx, jobs[0].ID); err != nil || got.State != queue.StateRunning {
				t.Fatalf("after the failed Tx: %+v %v; want the job still running", got, err)
			}
			if mine, children := rows(); mine != 0 || children != 0 {
				t.Fatalf("after the failed Tx: %d rows of mine, %d children; want none", mine, children)
			}
			if err := send(jobs[0].Lease(), `SELECT 1`); err != nil {
				t.Fatal(err)
			}
			if got, err := c.Get(ctx, jobs[0].ID); err != nil || got.State != queue.StateSucceeded {
				t.Fatalf("after the Tx: %+v %v; want the job succeeded", got, err)
			}
			if mine, children := rows(); mine != 1 || children != 1 {
				t.Fatalf("after the Tx: %d rows of mine, %d children; want 1 and 1", mine, children)
			}
		})
	}
}
