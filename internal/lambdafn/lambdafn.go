// Package lambdafn owns the handlers of crawlq's four Lambda functions (api, worker, dispatch,
// metrics) and what they share per execution environment: one database pool, the AWS config,
// the spider registry and the function's Config (what the environment contract Terraform sets
// says to it), built once by Setup (config.go is where the environment is read). The functions' mains only call
// Setup and lambda.Start; `crawlq local` calls the same handlers. One file per handler.
package lambdafn

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awsx"
	"crawlq/internal/clock"
	"crawlq/internal/db"
	"crawlq/internal/envconfig"
	"crawlq/internal/events"
	"crawlq/internal/migrate"
	"crawlq/internal/node"
	"crawlq/internal/spider"
)

// Deps are what every function of one execution environment shares.
type Deps struct {
	Pool    *pgxpool.Pool
	AWS     aws.Config
	Spiders *spider.Registry
	// Control is a node that is never run: its queue client and crawler serve the api, dispatch
	// and metrics (scheduling, listing, maintenance) without working any queue.
	Control *node.Node
	// Publisher publishes run events, to the bus Events reads from the environment: the api and
	// worker functions publish the events of the changes they make before they return (see
	// PublishRunEvents), the dispatch tick what is left.
	Publisher *events.Publisher
	// Config is what the environment says: to one function (Setup: LoadFunctionConfig), or to
	// all four (NewDeps: LoadConfig).
	Config Config
	Logger *slog.Logger
	// Clock tells the functions the time of day (the metrics' window). Default the wall clock.
	Clock clock.Clock
}

// Setup builds function fn's Deps from the environment getenv reads (nil: the process's): its
// Config through LoadFunctionConfig, the database through envconfig.DB. maxConns is the function's
// pool size unless CRAWLQ_DB_MAX_CONNS sets it (0: db's default).
func Setup(ctx context.Context, fn envconfig.Process, getenv func(string) string, maxConns int32) (*Deps, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	env := envconfig.New(getenv)
	cfg, err := LoadFunctionConfig(fn, env)
	if err != nil {
		return nil, err
	}
	logger, err := NewLogger(cfg.LogLevel, os.Stderr)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, err
	}
	dc, err := envconfig.DB(ctx, env, awsCfg, maxConns)
	if err != nil {
		return nil, err
	}
	pool, err := db.Open(ctx, dc)
	if err != nil {
		return nil, err
	}
	// On AWS the migrate function brings the schema up to date before the other functions run
	// (they connect as crawlq_app, which may not change the schema), so here this is one query
	// that finds nothing to do. Locally (`crawlq local`, tests, a superuser URL) it migrates;
	// safe when several start at once (migrations take a transaction-scoped lock).
	if _, err := migrate.Up(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("schema not up to date (on AWS, invoke the <name>-migrate function, or redeploy): %w", err)
	}
	d, err := NewDepsConfig(pool, awsCfg, nil, cfg, logger, nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// NewDeps assembles Deps from parts (tests and `crawlq local`), its Config read from getenv
// (nil: an empty environment). A nil registry loads the embedded spiders.
func NewDeps(pool *pgxpool.Pool, awsCfg aws.Config, reg *spider.Registry, getenv func(string) string, logger *slog.Logger) (*Deps, error) {
	cfg, err := LoadConfig(envconfig.New(getenv))
	if err != nil {
		return nil, err
	}
	return NewDepsConfig(pool, awsCfg, reg, cfg, logger, nil)
}

// NewDepsConfig assembles Deps from parts with a Config read already (`crawlq local` reads it at
// its start, before it connects). A nil registry loads the embedded spiders. The run events'
// monitor metrics go to metricsOut as EMF lines: nil is standard output, which Lambda sends to
// CloudWatch Logs (`crawlq local` at a terminal leaves them out).
func NewDepsConfig(pool *pgxpool.Pool, awsCfg aws.Config, reg *spider.Registry, cfg Config, logger *slog.Logger, metricsOut io.Writer) (*Deps, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if reg == nil {
		var err error
		if reg, err = node.LoadSpiders(""); err != nil {
			return nil, fmt.Errorf("load spiders: %w", err)
		}
	}
	ctl, err := node.New(node.Config{Pool: pool, Spiders: reg, MaintainEvery: -1, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("assemble node: %w", err)
	}
	d := &Deps{Pool: pool, AWS: awsCfg, Spiders: reg, Control: ctl, Config: cfg, Logger: logger}
	if metricsOut == nil {
		metricsOut = os.Stdout
	}
	if d.Publisher, err = d.Events(metricsOut); err != nil {
		ctl.Pipeline.Close(context.Background())
		return nil, fmt.Errorf("run events: %w", err)
	}
	return d, nil
}

// Close releases the control node's pipeline and the pool.
func (d *Deps) Close(ctx context.Context) error {
	err := d.Control.Pipeline.Close(ctx)
	d.Pool.Close()
	return err
}

// NewLogger returns a JSON logger at level ("debug", "info", "warn", "error"; empty: info).
func NewLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, envconfig.Errorf("CRAWLQ_LOG_LEVEL", "not debug, info, warn or error: %q", level)
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}
