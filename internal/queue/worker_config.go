package queue

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// WorkerConfig tunes a Worker.
type WorkerConfig struct {
	// Queue to work. Required.
	Queue string
	// ID names this worker in leases and the worker registry. Default host-pid-random.
	ID string
	// Kind is recorded in the worker registry: "process" (default), "lambda", "ecs".
	Kind string
	// Concurrency is the number of handlers running at once. Default 10.
	Concurrency int
	// BatchSize is the most jobs claimed per statement, and the number kept claimed ahead of the
	// handlers. Default Concurrency, at most 10000.
	BatchSize int
	// Lease is how long a claim lasts without a heartbeat. Default 30s.
	Lease time.Duration
	// HeartbeatInterval is how often leases are extended. Default Lease/3.
	HeartbeatInterval time.Duration
	// PollInterval is the wait after finding no due job. Default 200ms.
	PollInterval time.Duration
	// CompleteBatch is the most completions written per statement. Default 1000.
	CompleteBatch int
	// StopGrace is how long running handlers may finish after Run's context ends before their
	// contexts are cancelled and their jobs released. Default 10s.
	StopGrace time.Duration
	// MaxJobs stops the worker after it has claimed this many jobs (recycling). 0: no limit.
	MaxJobs int
	// HoldAhead is how many jobs its own process may hand this worker through Reserve beyond its
	// idle handlers: work found while handling a job then waits here, already leased, instead of
	// in the queue, and skips its claim (an update of every job's row). None is held beyond idle
	// handlers while the jobs waiting here have waited half a HeartbeatInterval (their leases
	// would soon need extending, and in the queue other workers could take them). Default 0:
	// only idle handlers are handed work. At most 100000.
	HoldAhead int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// TestSignals, when set, is where the worker tells a test what became of its jobs; several
	// workers may share one (a node's). Default none.
	TestSignals *WorkerTestSignals
}

func (c *WorkerConfig) setDefaults() error {
	if err := ValidateQueue(c.Queue); err != nil {
		return fmt.Errorf("worker config: %w", err)
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), newToken()&0xffff)
	}
	if c.Kind == "" {
		c.Kind = "process"
	}
	if c.Concurrency < 0 || c.BatchSize < 0 || c.BatchSize > 10000 || c.MaxJobs < 0 || c.HoldAhead < 0 || c.HoldAhead > 100000 {
		return fmt.Errorf("%w: worker config: Concurrency, BatchSize (<= 10000), MaxJobs and HoldAhead (<= 100000) must not be negative", ErrInvalid)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 10
	}
	if c.BatchSize == 0 {
		c.BatchSize = c.Concurrency
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.HeartbeatInterval >= c.Lease {
		return fmt.Errorf("%w: worker config: HeartbeatInterval %s must be shorter than Lease %s", ErrInvalid, c.HeartbeatInterval, c.Lease)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 200 * time.Millisecond
	}
	if c.CompleteBatch <= 0 {
		c.CompleteBatch = 1000
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
