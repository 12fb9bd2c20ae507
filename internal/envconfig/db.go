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

// DB builds the database configuration from the environment contract the Terraform stack sets
// (ReadDB) and resolves its credentials (DBVars.Resolve):
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
	v, err := ReadDB(env, maxConns)
	if err != nil {
		return db.Config{}, err
	}
	return v.Resolve(ctx, awsCfg)
}

// DBVars are the database variables as ReadDB read and checked them; Resolve turns them into a
// db.Config.
type DBVars struct {
	// config is the addressing, TLS, pool and exec settings; its credentials are Resolve's.
	config db.Config
	// iam is CRAWLQ_DB_IAM_AUTH; secretARN CRAWLQ_DB_SECRET_ARN.
	iam       bool
	secretARN string
	// nameSet and portSet: CRAWLQ_DB_NAME and CRAWLQ_DB_PORT were given, so the secret's own
	// do not replace them.
	nameSet, portSet bool
}

// UsesAWS reports whether Resolve needs AWS credentials: a host reached with an IAM token or a
// secret, not a URL. An unset database does not.
func (v DBVars) UsesAWS() bool { return v.config.Host != "" }

// ReadDB reads and checks the database variables (see DB) without network I/O; maxConns is the
// pool's size when CRAWLQ_DB_MAX_CONNS is unset. No database configured is not an error here:
// Resolve returns db.ErrNoDatabase, so a process that never opens one does not need one.
func ReadDB(env Env, maxConns int32) (DBVars, error) {
	var v DBVars
	c := &v.config
	c.ExecMode = env.String("CRAWLQ_DB_EXEC_MODE")
	if !db.ValidExecMode(c.ExecMode) {
		return DBVars{}, fmt.Errorf("db: %w", Errorf("CRAWLQ_DB_EXEC_MODE", "not exec, simple, cache_describe or cache_statement: %q", c.ExecMode))
	}
	conns, err := env.PositiveInt("CRAWLQ_DB_MAX_CONNS", int(maxConns))
	if err != nil || conns > 10000 {
		return DBVars{}, fmt.Errorf("db: %w", Errorf("CRAWLQ_DB_MAX_CONNS", "not a connection count 1-10000: %q", env.String("CRAWLQ_DB_MAX_CONNS")))
	}
	c.MaxConns = int32(conns)
	if u := env.String("DATABASE_URL"); u != "" {
		c.URL = u
		return v, nil
	}
	if c.Host = env.String("CRAWLQ_DB_HOST"); c.Host == "" {
		return v, nil
	}
	wrap := func(err error) (DBVars, error) { return DBVars{}, fmt.Errorf("db: %w", err) }
	port, err := env.PositiveInt("CRAWLQ_DB_PORT", 5432)
	if err != nil || port > 65535 {
		return wrap(Errorf("CRAWLQ_DB_PORT", "not a port number 1-65535: %q", env.String("CRAWLQ_DB_PORT")))
	}
	c.Port = port
	c.Name = env.StringOr("CRAWLQ_DB_NAME", "crawlq")
	v.nameSet, v.portSet = env.IsSet("CRAWLQ_DB_NAME"), env.IsSet("CRAWLQ_DB_PORT")
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
	if v.iam, err = env.Bool("CRAWLQ_DB_IAM_AUTH", false); err != nil {
		return wrap(err)
	}
	v.secretARN = env.String("CRAWLQ_DB_SECRET_ARN")
	switch {
	case v.iam && c.User == "":
		return wrap(errors.New("CRAWLQ_DB_USER is required with CRAWLQ_DB_IAM_AUTH"))
	case !v.iam && v.secretARN == "":
		return wrap(errors.New("CRAWLQ_DB_HOST is set but neither CRAWLQ_DB_IAM_AUTH=true nor CRAWLQ_DB_SECRET_ARN says how to authenticate"))
	}
	return v, nil
}

// Resolve is the db.Config the variables say, with its credentials: an IAM token source signed
// with awsCfg, or the secret, read here; db.ErrNoDatabase when no database was configured.
func (v DBVars) Resolve(ctx context.Context, awsCfg aws.Config) (db.Config, error) {
	c := v.config
	switch {
	case c.URL != "":
		return c, nil
	case c.Host == "":
		return db.Config{}, db.ErrNoDatabase
	case v.iam:
		var err error
		if c.Password, err = db.IAMPassword(awsCfg, c.Host, c.Port, c.User); err != nil {
			return db.Config{}, err
		}
		return c, nil
	}
	s, pw, err := db.SecretPassword(ctx, awsCfg, v.secretARN)
	if err != nil {
		return db.Config{}, err
	}
	if c.User == "" {
		c.User = s.Username
	}
	if c.User == "" {
		return db.Config{}, fmt.Errorf("db: %w", errors.New("no user: set CRAWLQ_DB_USER or put username in the secret"))
	}
	if !v.nameSet && s.DBName != "" {
		c.Name = s.DBName
	}
	if !v.portSet && s.Port > 0 {
		c.Port = s.Port
	}
	c.Password = pw
	return c, nil
}
