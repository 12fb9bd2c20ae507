package queue_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/db"
	"crawlq/internal/dbtest"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// heldReplies is a TCP proxy in front of Postgres that can hold back the server's replies: what
// the client sends still reaches the server and commits, but the client hears nothing until
// release.
type heldReplies struct {
	addr string
	mu   sync.Mutex
	gate chan struct{} // nil: replies flow; else they wait for it to close
}

func newHeldReplies(t *testing.T, target string) *heldReplies {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldReplies{addr: ln.Addr().String()}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.release(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns.Add(2)
			go func() { defer conns.Done(); _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				defer conns.Done()
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						p.wait()
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *heldReplies) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
}

func (p *heldReplies) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

func (p *heldReplies) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	if g != nil {
		<-g
	}
}

// A worker stopping cancels the context its handlers send their transactions with. A held insert
// whose commit the server made before the cancel must still reach the worker: Send waits for the
// answer of a batch it sent, so the job runs now instead of sitting leased to nobody until its
// lease expires and the rescue takes an attempt (or, with one attempt, kills it).
func TestSendCancelledAfterCommitStillHandsTheJobs(t *testing.T) {
	_, url := dbtest.Schema(t)
	direct := dbtest.Open(t, url, 2)
	hostport := strings.SplitN(strings.SplitN(url, "@", 2)[1], "/", 2)[0]
	proxy := newHeldReplies(t, hostport)
	ctx := ctxT(t)
	// While replies are held, a new connection cannot finish its handshake, and pgxpool pings a
	// connection idle for over a second before handing it out: so every connection is opened
	// first, and none is pinged.
	pcfg, err := db.Config{URL: strings.Replace(url, hostport, proxy.addr, 1), MaxConns: 6}.PoolConfig()
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var conns []*pgxpool.Conn
	for range pcfg.MaxConns {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Release()
	}
	c := queue.New(pool, queue.Config{})

	ran := make(chan *queue.Job, 1)
	w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", Concurrency: 1, BatchSize: 1, Lease: time.Minute,
		PollInterval: time.Hour}, func(_ context.Context, j *queue.Job) error {
		ran <- j
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = w.Run(wctx) }()
	defer func() { stop(); <-stopped }()
	var r *queue.Reservation
	testwait.Until(t, "r != nil", func() bool { r = w.Reserve(1); return r != nil })

	tx := c.NewTx()
	if err := tx.EnqueueHeld(r, []queue.EnqueueParams{{Queue: "q", Kind: "held", MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	proxy.hold()
	sctx, cancel := context.WithCancel(ctx)
	sent := make(chan error, 1)
	go func() { sent <- tx.Send(sctx) }()
	testwait.Until(t, "the held job is in the table", func() bool {
		var n int
		if err := direct.QueryRow(ctx, `SELECT count(*) FROM crawlq_job WHERE kind = 'held'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	cancel()
	// Paces the release after the cancel, so a Send that gives up on cancel has done so; a Send
	// that waits for its answer passes however long this is.
	time.Sleep(100 * time.Millisecond)
	proxy.release()
	if err := <-sent; err != nil {
		t.Fatalf("Send of a committed batch, cancelled while its answer was on the way: %v", err)
	}
	select {
	case j := <-ran:
		if j.Kind != "held" || j.Attempt != 1 {
			t.Fatalf("handed %+v", j)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the committed held job was not handed to the worker")
	}
}
