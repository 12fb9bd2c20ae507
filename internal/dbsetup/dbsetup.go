// Package dbsetup owns the deploy-time database step, run as a user that may change the
// schema (the RDS master user): bring the schema up to date and give the application role
// (created NOLOGIN by migration 0007) its login: the password kept in its Secrets Manager
// secret (clients behind RDS Proxy), or IAM tokens only (rds_iam, clients connecting to the
// instance itself). The functions and runners then connect as that
// role, which may only read and write rows. The migrate Lambda function runs it on every
// deploy whose code changed; `crawlq deploy` can run it locally too.
package dbsetup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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
	// AppIAM grants the role rds_iam and LOGIN, so RDS accepts only IAM tokens for it (an
	// instance reached without RDS Proxy); it excludes AppPassword.
	AppIAM bool
}

func (c *Config) validate() error {
	if c.Pool == nil {
		return fmt.Errorf("%w: Pool is required", ErrConfig)
	}
	if c.AppRole == "" {
		c.AppRole = DefaultAppRole
	}
	if c.AppIAM && c.AppPassword != nil {
		return fmt.Errorf("%w: AppIAM and AppPassword exclude each other (a member of rds_iam cannot log in with a password)", ErrConfig)
	}
	return nil
}

// Result says what a Run did; it is the migrate function's response.
type Result struct {
	// Applied are the migration versions this run applied (none when the schema was current).
	Applied []int `json:"applied"`
	// AppRole is the role that was given its login, empty when neither AppPassword nor AppIAM
	// was set.
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
	if cfg.AppIAM {
		if err := grantIAM(ctx, cfg.Pool, cfg.AppRole); err != nil {
			return res, err
		}
		res.AppRole = cfg.AppRole
		return res, nil
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
	// The server quotes the password too (format's %L), so it never passes through Go string
	// building.
	if err := exec(ctx, cfg.Pool, `SELECT format('ALTER ROLE %I WITH LOGIN PASSWORD %L', $1::text, $2::text)`, cfg.AppRole, pw); err != nil {
		return res, fmt.Errorf("give %s its login: %w", cfg.AppRole, err)
	}
	// A stack moved back behind the proxy: the proxy logs in with the password, which RDS
	// refuses for a member of rds_iam.
	if err := exec(ctx, cfg.Pool, `SELECT format('REVOKE rds_iam FROM %I', $1::text) WHERE EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam')`, cfg.AppRole); err != nil {
		return res, fmt.Errorf("revoke rds_iam from %s: %w", cfg.AppRole, err)
	}
	res.AppRole = cfg.AppRole
	return res, nil
}

// grantIAM makes IAM tokens role's only login: RDS's rds_iam role (present on every RDS
// PostgreSQL instance) switches its members to IAM authentication.
func grantIAM(ctx context.Context, pool *pgxpool.Pool, role string) error {
	var ok bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam')`).Scan(&ok); err != nil {
		return fmt.Errorf("look for rds_iam: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: AppIAM: this server has no rds_iam role (it is not RDS); give %s a password instead", ErrConfig, role)
	}
	for _, q := range []string{`SELECT format('GRANT rds_iam TO %I', $1::text)`, `SELECT format('ALTER ROLE %I WITH LOGIN', $1::text)`} {
		if err := exec(ctx, pool, q, role); err != nil {
			return fmt.Errorf("give %s its IAM login: %w", role, err)
		}
	}
	return nil
}

// exec runs the statement that query (with the role's name as $1, then args) builds, if it
// builds one: role statements take no bind parameters, so the server quotes the name itself
// (format's %I).
func exec(ctx context.Context, pool *pgxpool.Pool, query, role string, args ...any) error {
	var stmt string
	if err := pool.QueryRow(ctx, query, append([]any{role}, args...)...).Scan(&stmt); errors.Is(err, pgx.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	_, err := pool.Exec(ctx, stmt)
	return err
}

// Handler returns the migrate function's handler: one Run per invocation; the payload is
// not read.
func Handler(cfg Config) func(ctx context.Context, _ json.RawMessage) (Result, error) {
	return func(ctx context.Context, _ json.RawMessage) (Result, error) {
		return Run(ctx, cfg)
	}
}
