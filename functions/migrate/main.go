// Command migrate is the crawlq-migrate Lambda function: the deploy's database step, as the
// master user (see internal/dbsetup). Terraform invokes it on each deploy whose code changed.
//
// The first apply invokes it as soon as the proxy's target is registered, while the proxy and
// the instance may still be starting, so it connects inside the invocation (not at init, which
// Lambda bounds to 10 s), retrying with backoff for up to two minutes, and then fails with a
// message that says so.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"crawlq/internal/awsx"
	"crawlq/internal/dbsetup"
	"crawlq/internal/envconfig"
)

func main() {
	ctx := context.Background()
	awsCfg, err := awsx.Load(ctx)
	if err != nil {
		log.Fatalf("crawlq-migrate: %v", err)
	}
	// The database settings are checked at init: a bad environment fails at once, not after
	// two minutes of retries.
	env := envconfig.New(os.Getenv)
	if _, err := envconfig.DB(ctx, env, awsCfg, envconfig.MigrateMaxConns); err != nil {
		log.Fatalf("crawlq-migrate: %v", err)
	}
	m := &migrator{
		open:   func(ctx context.Context) (dbsetup.Config, error) { return envconfig.DBSetup(ctx, env, awsCfg) },
		retry:  deployRetry,
		logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	}
	lambda.Start(m.handle)
}

// deployRetry is how the function waits for the database on a first apply: RDS Proxy
// registers its target before it accepts connections, typically for tens of seconds.
var deployRetry = retry{Within: 2 * time.Minute}

// retry bounds the connection attempts.
type retry struct {
	// Within is how long to keep trying after the first attempt. Required.
	Within time.Duration
	// First is the wait after the first failure; it doubles up to Max. Default 1 s.
	First time.Duration
	// Max is the longest wait between attempts. Default 10 s.
	Max time.Duration
	// Attempt bounds one attempt (a connect that hangs on a half-started proxy). Default 20 s.
	Attempt time.Duration
}

// migrator connects once (with retries) and reuses the connection on warm invocations.
type migrator struct {
	open   func(ctx context.Context) (dbsetup.Config, error)
	retry  retry
	logger *slog.Logger

	mu  sync.Mutex
	cfg *dbsetup.Config
}

func (m *migrator) handle(ctx context.Context, payload json.RawMessage) (dbsetup.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg == nil {
		cfg, err := connect(ctx, m.open, m.retry, m.logger)
		if err != nil {
			return dbsetup.Result{}, err
		}
		m.cfg = &cfg
	}
	return dbsetup.Handler(*m.cfg)(ctx, payload)
}

// connect calls open until it succeeds, waiting First, 2×First, ... (at most Max) between
// attempts, for at most r.Within (and never past ctx), logging each failure; then it gives up
// with the last error.
func connect(ctx context.Context, open func(context.Context) (dbsetup.Config, error), r retry, logger *slog.Logger) (dbsetup.Config, error) {
	if r.First <= 0 {
		r.First = time.Second
	}
	if r.Max <= 0 {
		r.Max = 10 * time.Second
	}
	if r.Attempt <= 0 {
		r.Attempt = 20 * time.Second
	}
	start := time.Now()
	deadline := start.Add(r.Within)
	wait := r.First
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, r.Attempt)
		cfg, err := open(actx)
		cancel()
		if err == nil {
			if attempt > 1 {
				logger.Info("connected to the database", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return cfg, nil
		}
		now := time.Now()
		if ctx.Err() != nil || !now.Add(wait).Before(deadline) {
			return dbsetup.Config{}, fmt.Errorf("connect to the database: gave up after %s and %d attempts (the proxy or its target may still be starting; invoke the migrate function again, or re-run crawlq deploy): %w",
				now.Sub(start).Round(time.Second), attempt, err)
		}
		logger.Warn("database not reachable yet; retrying", "attempt", attempt, "retry_in", wait.String(), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return dbsetup.Config{}, fmt.Errorf("connect to the database: %w (after %d attempts, the last: %v)", ctx.Err(), attempt, err)
		case <-t.C:
		}
		wait = min(2*wait, r.Max)
	}
}
