package envconfig

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/db"
)

// DB builds the database configuration from the environment contract the Terraform stack sets:
//
//   - DATABASE_URL: a plain URL (local runs, tests); the CRAWLQ_DB_* addressing is ignored.
//   - CRAWLQ_DB_HOST, CRAWLQ_DB_PORT (default 5432), CRAWLQ_DB_NAME (default "crawlq"),
//     CRAWLQ_DB_USER: an RDS Proxy (or RDS) endpoint, reached with TLS.
//   - CRAWLQ_DB_IAM_AUTH=true: authenticate with an IAM token built for every new connection,
//     signed with awsCfg's credentials and region.
//   - otherwise CRAWLQ_DB_SECRET_ARN: a Secrets Manager secret holding username and password
//     (and optionally port and dbname), read again for every new connection.
//   - CRAWLQ_DB_EXEC_MODE: see db.Config.ExecMode (default "exec", which does not pin RDS Proxy).
//   - CRAWLQ_DB_TLS=false turns TLS off for a host (a local server without TLS); default true.
//   - CRAWLQ_DB_CA_FILE: a PEM bundle of roots to trust instead of the system's.
//   - CRAWLQ_DB_CA_URL: an https URL of such a bundle (db.Config.CAURL, fetched where the pool is
//     opened): the RDS roots for a direct connection to an instance.
//   - CRAWLQ_DB_MAX_CONNS: the pool's size; unset: maxConns, the process's own default (each
//     process names its one: lambdafn.Setup's callers, crawlq's commands, DBSetup's).
//
// The secret is read once here, so a missing or unreadable secret fails at start-up rather than
// at the first query.
func DB(ctx context.Context, env Env, awsCfg aws.Config, maxConns int32) (db.Config, error) {
	var c db.Config
	c.ExecMode = env.String("CRAWLQ_DB_EXEC_MODE")
	if !db.ValidExecMode(c.ExecMode) {
		return db.Config{}, fmt.Errorf("db: %w", Errorf("CRAWLQ_DB_EXEC_MODE", "not exec, simple, cache_describe or cache_statement: %q", c.ExecMode))
	}
	conns, err := env.PositiveInt("CRAWLQ_DB_MAX_CONNS", int(maxConns))
	if err != nil || conns > 10000 {
		return db.Config{}, fmt.Errorf("db: %w", Errorf("CRAWLQ_DB_MAX_CONNS", "not a connection count 1-10000: %q", env.String("CRAWLQ_DB_MAX_CONNS")))
	}
	c.MaxConns = int32(conns)
	if u := env.String("DATABASE_URL"); u != "" {
		c.URL = u
		return c, nil
	}
	c.Host = env.String("CRAWLQ_DB_HOST")
	if c.Host == "" {
		return db.Config{}, db.ErrNoDatabase
	}
	wrap := func(err error) (db.Config, error) { return db.Config{}, fmt.Errorf("db: %w", err) }
	port, err := env.PositiveInt("CRAWLQ_DB_PORT", 5432)
	if err != nil || port > 65535 {
		return wrap(Errorf("CRAWLQ_DB_PORT", "not a port number 1-65535: %q", env.String("CRAWLQ_DB_PORT")))
	}
	c.Port = port
	c.Name = env.StringOr("CRAWLQ_DB_NAME", "crawlq")
	c.User = env.String("CRAWLQ_DB_USER")
	if c.TLS, err = env.Bool("CRAWLQ_DB_TLS", true); err != nil {
		return wrap(err)
	}
	if c.CAFile = env.String("CRAWLQ_DB_CA_FILE"); c.CAFile != "" {
		if _, err := os.Stat(c.CAFile); err != nil {
			return wrap(Errorf("CRAWLQ_DB_CA_FILE", "%w", err))
		}
	}
	if u := env.String("CRAWLQ_DB_CA_URL"); u != "" && c.TLS {
		if p, err := url.Parse(u); err != nil || p.Scheme != "https" || p.Host == "" {
			return wrap(Errorf("CRAWLQ_DB_CA_URL", "not an https:// URL with a host: %q", u))
		}
		c.CAURL = u
	}
	iam, err := env.Bool("CRAWLQ_DB_IAM_AUTH", false)
	if err != nil {
		return wrap(err)
	}
	arn := env.String("CRAWLQ_DB_SECRET_ARN")
	switch {
	case iam:
		if c.User == "" {
			return wrap(errors.New("CRAWLQ_DB_USER is required with CRAWLQ_DB_IAM_AUTH"))
		}
		if c.Password, err = db.IAMPassword(awsCfg, c.Host, c.Port, c.User); err != nil {
			return db.Config{}, err
		}
	case arn != "":
		s, pw, err := db.SecretPassword(ctx, awsCfg, arn)
		if err != nil {
			return db.Config{}, err
		}
		if c.User == "" {
			c.User = s.Username
		}
		if c.User == "" {
			return wrap(errors.New("no user: set CRAWLQ_DB_USER or put username in the secret"))
		}
		if !env.IsSet("CRAWLQ_DB_NAME") && s.DBName != "" {
			c.Name = s.DBName
		}
		if !env.IsSet("CRAWLQ_DB_PORT") && s.Port > 0 {
			c.Port = s.Port
		}
		c.Password = pw
	default:
		return wrap(errors.New("CRAWLQ_DB_HOST is set but neither CRAWLQ_DB_IAM_AUTH=true nor CRAWLQ_DB_SECRET_ARN says how to authenticate"))
	}
	return c, nil
}
