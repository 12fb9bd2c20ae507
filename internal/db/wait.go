package db

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
)

// connectRetry paces the tries of OpenWaiting: 250 ms, doubling, at most 10 s, with jitter so the
// workers that met one outage do not all come back at once.
var connectRetry = backoff.Policy{Base: 250 * time.Millisecond, Max: 10 * time.Second, Jitter: true}

// OpenWaiting opens a pool as Open does, but while the database refuses the connection for a
// reason that passes (IsTransient: too many connections, starting up, unreachable), it says so
// and tries again with backoff, for up to wait. A process that starts beside a database that is
// restarting or full (SQLSTATE 53300) then comes up with it instead of exiting; anything else
// (a wrong password, a bad URL) fails at once.
func OpenWaiting(ctx context.Context, c Config, wait time.Duration, log *slog.Logger) (*pgxpool.Pool, error) {
	waited := clock.StartStopwatch()
	c, err := c.withRoots(ctx) // once, not on every try
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		pool, err := Open(ctx, c)
		if err == nil {
			if try > 1 {
				log.Info("database connected", "tries", try)
			}
			return pool, nil
		}
		if !IsTransient(err) || ctx.Err() != nil {
			return nil, err
		}
		d := connectRetry.Delay(try)
		if waited.Elapsed()+d > wait {
			return nil, fmt.Errorf("db: the database refused connections for %s: %w", wait, err)
		}
		log.Warn("the database refuses connections; retrying", "in", d.Round(time.Millisecond), "try", try, "err", err)
		if !backoff.Sleep(ctx, d) {
			return nil, ctx.Err()
		}
	}
}
