// Package dbsetup owns the deploy-time database step, run as a user that may change the
// schema (the RDS master user, through RDS Proxy with IAM auth): bring the schema up to date
// and give the application role (created NOLOGIN by migration 0007) its login and the
// password kept in its Secrets Manager secret. The functions and runners then connect as that
// role, which may only read and write rows. The migrate Lambda function runs it on every
// deploy whose code changed; `crawlq deploy` can run it locally too.
package dbsetup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/migrate"
)

// DefaultAppRole is the role migration 0007 creates.
const DefaultAppRole = "crawlq_app"

// ErrConfig is returned (wrapped, naming the field or variable) for an unusable Config.
var ErrConfig = errors.New("dbsetup: bad config")

// Config says where and as whom to set the database up.
type Config struct {
	// Pool connects as a user allowed to migrate and to ALTER ROLE the application role
	// (the master user). Required.
	Pool *pgxpool.Pool
	// AppRole is the application role to give a login. Default DefaultAppRole.
	AppRole string
	// AppPassword returns the role's password (read from its secret on each Run, so a rotated
	// secret is picked up). Nil leaves the role's login alone (local setups with trust auth).
	AppPassword func(ctx context.Context) (string, error)
}

func (c *Config) validate() error {
	if c.Pool == nil {
		return fmt.Errorf("%w: Pool is required", ErrConfig)
	}
	if c.AppRole == "" {
		c.AppRole = DefaultAppRole
	}
	return nil
}

// Result says what a Run did; it is the migrate function's response.
type Result struct {
	// Applied are the migration versions this run applied (none when the schema was current).
	Applied []int `json:"applied"`
	// AppRole is the role that was given its login, empty when AppPassword was nil.
	AppRole string `json:"app_role,omitempty"`
}

// Run migrates the schema and then sets the application role's login and password.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	applied, err := migrate.Up(ctx, cfg.Pool)
	if err != nil {
		return Result{Applied: applied}, fmt.Errorf("migrate: %w", err)
	}
	res := Result{Applied: applied}
	if res.Applied == nil {
		res.Applied = []int{}
	}
	if cfg.AppPassword == nil {
		return res, nil
	}
	pw, err := cfg.AppPassword(ctx)
	if err != nil {
		return res, fmt.Errorf("app role password: %w", err)
	}
	if pw == "" {
		return res, errors.New("app role password: empty")
	}
	// ALTER ROLE takes no bind parameters, so the server quotes the name and password itself
	// (format's %I and %L) and the statement never passes through Go string building.
	var stmt string
	if err := cfg.Pool.QueryRow(ctx, `SELECT format('ALTER ROLE %I WITH LOGIN PASSWORD %L', $1::text, $2::text)`,
		cfg.AppRole, pw).Scan(&stmt); err != nil {
		return res, fmt.Errorf("build ALTER ROLE: %w", err)
	}
	if _, err := cfg.Pool.Exec(ctx, stmt); err != nil {
		return res, fmt.Errorf("give %s its login: %w", cfg.AppRole, err)
	}
	res.AppRole = cfg.AppRole
	return res, nil
}

// Handler returns the migrate function's handler: one Run per invocation; the payload is
// not read.
func Handler(cfg Config) func(ctx context.Context, _ json.RawMessage) (Result, error) {
	return func(ctx context.Context, _ json.RawMessage) (Result, error) {
		return Run(ctx, cfg)
	}
}
