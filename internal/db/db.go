// Package db opens crawlq's connection pool to PostgreSQL.
//
// It owns how a process reaches the database: a plain URL (local development, tests),
// or an RDS Proxy endpoint authenticated with an IAM token or a Secrets Manager secret,
// over TLS that verifies the server's certificate and name (sslmode=verify-full), the
// pgx query exec mode, and how array parameters are written in the text format that mode
// sends (arrays.go). The default exec mode does not rely on server-side
// prepared statements surviving between transactions, so connections behind RDS Proxy
// are not pinned.
package db

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoDatabase is returned when a Config names no way to reach a database.
var ErrNoDatabase = errors.New("no database configured: set DATABASE_URL (or CRAWLQ_DB_HOST with IAM auth or a secret)")

// Config says how to reach the database. The zero value is not usable: set URL, or Host.
type Config struct {
	// URL is a postgres:// connection URL. When set, Host and the auth fields are ignored.
	URL string
	// Host, Port, User, Name address an RDS Proxy (or RDS) endpoint. Port defaults to 5432.
	Host string
	Port int
	User string
	Name string
	// Password supplies the password for each new connection (an IAM token or a secret).
	// Nil means no password. It is called for every new connection because IAM tokens
	// expire after 15 minutes.
	Password func(ctx context.Context) (string, error)
	// TLS requires TLS for Host connections and verifies the server: its certificate must
	// chain to a root in CAFile (or the system roots) and name Host (sslmode=verify-full),
	// with no fallback to plaintext. Default false; envconfig.DB sets it unless CRAWLQ_DB_TLS=false.
	// RDS Proxy's certificates come from ACM and chain to the Amazon Root CAs, which the
	// system bundle holds (the runner image ships Debian's, Lambda's provided.al2023 has its
	// own), so the proxy needs no CAFile. A direct connection to an RDS instance needs the
	// RDS bundle (https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem) in CAFile
	// or CAPEM (FetchRoots).
	TLS bool
	// CAFile is a PEM bundle of the roots TLS trusts instead of the system's. Default none.
	CAFile string
	// CAPEM is a PEM bundle of the roots TLS trusts instead of the system's (and CAFile's).
	// Default none.
	CAPEM []byte
	// CAURL is an https URL of such a bundle, fetched by Open (FetchRoots, with the system
	// roots) into CAPEM when CAPEM is empty and TLS is on: configuration is read without
	// network I/O, the fetch happens where the pool is opened. Default none.
	CAURL string
	// ExecMode is the pgx query exec mode: "exec" (default: unnamed statements,
	// safe behind RDS Proxy without pinning), "simple" (simple protocol),
	// "cache_describe", or "cache_statement" (fastest, pins RDS Proxy connections).
	// When empty, a default_query_exec_mode parameter in URL (pgx's own) is honoured:
	// a worker that connects straight to Postgres can set cache_statement there, so
	// statements are planned once per connection instead of on every execution.
	ExecMode string
	// MaxConns bounds the pool. Default 10.
	MaxConns int32
	// AppName is reported as application_name. Default "crawlq".
	AppName string
}

func execMode(s string) (pgx.QueryExecMode, error) {
	switch s {
	case "", "exec":
		return pgx.QueryExecModeExec, nil
	case "simple":
		return pgx.QueryExecModeSimpleProtocol, nil
	case "cache_describe":
		return pgx.QueryExecModeCacheDescribe, nil
	case "cache_statement":
		return pgx.QueryExecModeCacheStatement, nil
	}
	return 0, fmt.Errorf("db: ExecMode %q: want exec, simple, cache_describe or cache_statement", s)
}

// PoolConfig builds the pgxpool configuration for c without connecting.
func (c Config) PoolConfig() (*pgxpool.Config, error) {
	mode, err := execMode(c.ExecMode)
	if err != nil {
		return nil, err
	}
	var pc *pgxpool.Config
	switch {
	case c.URL != "":
		pc, err = pgxpool.ParseConfig(c.URL)
		if err != nil {
			return nil, fmt.Errorf("db: parse URL: %w", err)
		}
	case c.Host != "":
		port := c.Port
		if port == 0 {
			port = 5432
		}
		dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", c.Host, port, c.User, c.Name)
		if c.TLS {
			dsn = fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=verify-full", c.Host, port, c.User, c.Name)
			if c.CAFile != "" {
				if _, err := os.Stat(c.CAFile); err != nil {
					return nil, fmt.Errorf("db: CAFile: %w", err)
				}
				dsn += " sslrootcert=" + c.CAFile
			}
		}
		pc, err = pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("db: build config: %w", err)
		}
		if c.TLS && len(c.CAPEM) > 0 {
			roots, err := rootPool(c.CAPEM)
			if err != nil {
				return nil, fmt.Errorf("db: CAPEM: %w", err)
			}
			pc.ConnConfig.TLSConfig.RootCAs = roots
			for _, fb := range pc.ConnConfig.Fallbacks {
				if fb.TLSConfig != nil {
					fb.TLSConfig.RootCAs = roots
				}
			}
		}
		if c.Password != nil {
			pw := c.Password
			pc.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
				p, err := pw(ctx)
				if err != nil {
					return fmt.Errorf("db: get password: %w", err)
				}
				cc.Password = p
				return nil
			}
		}
	default:
		return nil, ErrNoDatabase
	}
	if c.ExecMode != "" || c.URL == "" || !strings.Contains(c.URL, "default_query_exec_mode=") {
		pc.ConnConfig.DefaultQueryExecMode = mode
	}
	pc.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		registerArrayEncoders(conn.TypeMap())
		return nil
	}
	if c.MaxConns > 0 {
		pc.MaxConns = c.MaxConns
	} else if c.URL == "" || !strings.Contains(c.URL, "pool_max_conns") {
		pc.MaxConns = 10
	}
	name := c.AppName
	if name == "" {
		name = "crawlq"
	}
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = name
	}
	pc.HealthCheckPeriod = 30 * time.Second
	return pc, nil
}

// caFetchTimeout bounds the fetch of CAURL.
const caFetchTimeout = 20 * time.Second

// withRoots is c with CAURL's bundle fetched into CAPEM, when it has to be.
func (c Config) withRoots(ctx context.Context) (Config, error) {
	if c.CAURL == "" || !c.TLS || len(c.CAPEM) > 0 {
		return c, nil
	}
	fctx, cancel := context.WithTimeout(ctx, caFetchTimeout)
	defer cancel()
	pem, err := FetchRoots(fctx, http.DefaultClient, c.CAURL)
	if err != nil {
		return c, fmt.Errorf("db: CAURL: %w", err)
	}
	c.CAPEM = pem
	return c, nil
}

// Open connects a pool and checks it with a ping; it first fetches CAURL's roots, if any.
func Open(ctx context.Context, c Config) (*pgxpool.Pool, error) {
	c, err := c.withRoots(ctx)
	if err != nil {
		return nil, err
	}
	pc, err := c.PoolConfig()
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("db: open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("db: connect: %w", err)
	}
	return pool, nil
}
