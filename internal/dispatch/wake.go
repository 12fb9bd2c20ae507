package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/backoff"
)

// WakeChannel is the Postgres notification channel on which a process that changed what
// dispatch should act on (a schedule, cancel, redrive or push from the CLI) wakes a dispatcher
// that listens on the same database: `crawlq local`'s (Listen). On AWS the dispatch Lambda does
// not listen (RDS Proxy pins every session that LISTENs, and a Lambda is frozen between
// invocations); there the api pokes the dispatch function instead (api.Config.Poke).
const WakeChannel = "crawlq_wake"

// Execer runs a statement: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Wake notifies the dispatcher listening on db's database that runIDs changed (none: something
// else did, such as a push). Inside a transaction the notification goes out at its commit, and
// not at all if it rolls back. The payload names the current schema, so that several crawlq
// databases in one Postgres database (tests, a schema per stack) wake only their own dispatcher.
// Nobody listening costs nothing.
func Wake(ctx context.Context, db Execer, runIDs ...int64) error {
	ids := make([]string, len(runIDs))
	for i, id := range runIDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	if _, err := db.Exec(ctx, "SELECT pg_notify($1, current_schema() || ' ' || $2::text)", WakeChannel, strings.Join(ids, ",")); err != nil {
		return fmt.Errorf("wake dispatch: %w", err)
	}
	return nil
}

// ListenConfig wires Listen. Pool and OnWake are required.
type ListenConfig struct {
	Pool *pgxpool.Pool
	// OnWake is called with the runs named by the notifications that arrived together (nil when
	// none named a run), and once with nil after each (re)connection, since notifications sent
	// while no connection listened are lost. Calls do not overlap.
	OnWake func(ctx context.Context, runIDs []int64)
	// Gather is how long Listen keeps collecting notifications after the first before it calls
	// OnWake, so a burst costs one wake. Default 20ms.
	Gather time.Duration
	// Retry spaces reconnections after the listening connection fails. Default 100ms doubling
	// to 5s, with jitter.
	Retry backoff.Policy
	// Ping is how long Listen waits for a notification before it pings the connection, so a
	// connection that died without a word (a half-open TCP connection) is found and reopened
	// instead of waiting forever. Default 30s.
	Ping time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Listen listens on WakeChannel with a connection of its own (taken from Pool and not returned
// to it: a pooled connection left listening would hand its notifications to whoever borrows it
// next) and calls OnWake for the notifications of its schema, until ctx ends. A lost connection
// is logged and reopened with backoff; Listen returns only ctx's error.
func Listen(ctx context.Context, cfg ListenConfig) error {
	if cfg.Pool == nil || cfg.OnWake == nil {
		return errors.New("dispatch: Listen needs Pool and OnWake")
	}
	if cfg.Gather <= 0 {
		cfg.Gather = 20 * time.Millisecond
	}
	if cfg.Ping <= 0 {
		cfg.Ping = 30 * time.Second
	}
	if cfg.Retry.Base == 0 {
		cfg.Retry = backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: true}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for failures := 0; ; {
		err := listenOnce(ctx, cfg, func() { failures = 0 })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures++
		d := cfg.Retry.Delay(failures)
		cfg.Logger.Warn("dispatch: wake listener lost its connection; wakes wait for the next tick until it is back",
			"err", err, "retry_in", d)
		if !backoff.Sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

// listenOnce listens on one connection until it fails or ctx ends; listening calls ok.
func listenOnce(ctx context.Context, cfg ListenConfig, ok func()) error {
	pc, err := cfg.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return fmt.Errorf("current schema: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+WakeChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ok()
	cfg.OnWake(ctx, nil) // what changed while nobody listened
	for {
		wctx, cancel := context.WithTimeout(ctx, cfg.Ping)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && pgconn.Timeout(err) {
			// Quiet for a while: make sure the connection is still there.
			if err := conn.Ping(ctx); err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			continue
		}
		if err != nil {
			return err
		}
		var runs []int64
		mine := false
		add := func(n *pgconn.Notification) {
			ids, ok := parseWake(n.Payload, schema)
			mine = mine || ok
			runs = append(runs, ids...)
		}
		add(n)
		// Gather the rest of a burst: one wake serves them all.
		gctx, cancel := context.WithTimeout(ctx, cfg.Gather)
		for {
			n, err := conn.WaitForNotification(gctx)
			if err != nil {
				break
			}
			add(n)
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if mine {
			cfg.OnWake(ctx, runs)
		}
	}
}

// parseWake reads a Wake payload: whether it is for schema, and the runs it names.
func parseWake(payload, schema string) ([]int64, bool) {
	s, list, _ := strings.Cut(payload, " ")
	if s != schema {
		return nil, false
	}
	var ids []int64
	for _, f := range strings.Split(list, ",") {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	return ids, true
}
