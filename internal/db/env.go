package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// secret is the JSON shape RDS and Secrets Manager use for database credentials. Host, port and
// dbname are optional: the environment's CRAWLQ_DB_* values win when set.
type secret struct {
	Username string          `json:"username"`
	Password string          `json:"password"`
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"` // RDS writes a number, hand-made secrets often a string
	DBName   string          `json:"dbname"`
}

// readSecret reads a database credentials secret (JSON with username and password).
func readSecret(ctx context.Context, sm *secretsmanager.Client, arn string) (secret, error) {
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return secret{}, fmt.Errorf("read database secret: %w", err)
	}
	var s secret
	if out.SecretString == nil || json.Unmarshal([]byte(*out.SecretString), &s) != nil {
		return secret{}, errors.New("read database secret: not a JSON object with username and password")
	}
	if s.Password == "" {
		return secret{}, errors.New("read database secret: no password in it")
	}
	return s, nil
}

// ReadCredentials reads the username and password of a database credentials secret (the JSON
// shape RDS writes). The migrate step reads the application role's secret with it.
func ReadCredentials(ctx context.Context, sm *secretsmanager.Client, arn string) (user, password string, err error) {
	s, err := readSecret(ctx, sm, arn)
	if err != nil {
		return "", "", fmt.Errorf("db: %w", err)
	}
	return s.Username, s.Password, nil
}

// FromEnv builds a Config from the environment contract the Terraform stack sets:
//
//   - DATABASE_URL: a plain URL (local runs, tests); everything else is ignored.
//   - CRAWLQ_DB_HOST, CRAWLQ_DB_PORT (default 5432), CRAWLQ_DB_NAME (default "crawlq"),
//     CRAWLQ_DB_USER: an RDS Proxy (or RDS) endpoint, reached with TLS.
//   - CRAWLQ_DB_IAM_AUTH=true: authenticate with an IAM token built for every new connection
//     (tokens expire after 15 minutes), signed with awsCfg's credentials and region.
//   - otherwise CRAWLQ_DB_SECRET_ARN: a Secrets Manager secret holding username and password
//     (and optionally host, port, dbname), read again for every new connection so a rotated
//     password is picked up.
//   - CRAWLQ_DB_EXEC_MODE: see Config.ExecMode (default "exec", which does not pin RDS Proxy).
//   - CRAWLQ_DB_TLS=false turns TLS off for a host (a local server without TLS); default true,
//     which verifies the server's certificate and name (see Config.TLS).
//   - CRAWLQ_DB_CA_FILE: a PEM bundle of roots to trust instead of the system's (Config.CAFile).
//
// The secret is read once here (to learn the user and any host in it), so a missing or
// unreadable secret fails at start-up rather than at the first query.
func FromEnv(ctx context.Context, getenv func(string) string, awsCfg aws.Config) (Config, error) {
	var c Config
	c.ExecMode = strings.TrimSpace(getenv("CRAWLQ_DB_EXEC_MODE"))
	if _, err := execMode(c.ExecMode); err != nil {
		return Config{}, fmt.Errorf("db: CRAWLQ_DB_EXEC_MODE %q: want exec, simple, cache_describe or cache_statement", c.ExecMode)
	}
	if u := strings.TrimSpace(getenv("DATABASE_URL")); u != "" {
		c.URL = u
		return c, nil
	}
	c.Host = strings.TrimSpace(getenv("CRAWLQ_DB_HOST"))
	if c.Host == "" {
		return Config{}, ErrNoDatabase
	}
	c.Port = 5432
	if p := strings.TrimSpace(getenv("CRAWLQ_DB_PORT")); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Config{}, fmt.Errorf("db: CRAWLQ_DB_PORT %q: want a port number 1-65535", p)
		}
		c.Port = n
	}
	c.Name = strings.TrimSpace(getenv("CRAWLQ_DB_NAME"))
	if c.Name == "" {
		c.Name = "crawlq"
	}
	c.User = strings.TrimSpace(getenv("CRAWLQ_DB_USER"))
	c.TLS = true
	if v := strings.TrimSpace(getenv("CRAWLQ_DB_TLS")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("db: CRAWLQ_DB_TLS %q: want true or false", v)
		}
		c.TLS = b
	}
	c.CAFile = strings.TrimSpace(getenv("CRAWLQ_DB_CA_FILE"))
	if c.CAFile != "" {
		if _, err := os.Stat(c.CAFile); err != nil {
			return Config{}, fmt.Errorf("db: CRAWLQ_DB_CA_FILE %q: %w", c.CAFile, err)
		}
	}
	iam := false
	if v := strings.TrimSpace(getenv("CRAWLQ_DB_IAM_AUTH")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("db: CRAWLQ_DB_IAM_AUTH %q: want true or false", v)
		}
		iam = b
	}
	arn := strings.TrimSpace(getenv("CRAWLQ_DB_SECRET_ARN"))
	switch {
	case iam:
		if c.User == "" {
			return Config{}, errors.New("db: CRAWLQ_DB_USER is required with CRAWLQ_DB_IAM_AUTH")
		}
		if awsCfg.Region == "" || awsCfg.Credentials == nil {
			return Config{}, errors.New("db: IAM auth needs an AWS region and credentials")
		}
		endpoint := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
		region, user, creds := awsCfg.Region, c.User, awsCfg.Credentials
		c.Password = func(ctx context.Context) (string, error) {
			tok, err := auth.BuildAuthToken(ctx, endpoint, region, user, creds)
			if err != nil {
				return "", fmt.Errorf("build IAM auth token: %w", err)
			}
			return tok, nil
		}
	case arn != "":
		sm := secretsmanager.NewFromConfig(awsCfg)
		read := func(ctx context.Context) (secret, error) { return readSecret(ctx, sm, arn) }
		s, err := read(ctx)
		if err != nil {
			return Config{}, fmt.Errorf("db: %w", err)
		}
		if c.User == "" {
			c.User = s.Username
		}
		if c.User == "" {
			return Config{}, errors.New("db: no user: set CRAWLQ_DB_USER or put username in the secret")
		}
		if getenv("CRAWLQ_DB_NAME") == "" && s.DBName != "" {
			c.Name = s.DBName
		}
		if getenv("CRAWLQ_DB_PORT") == "" && len(s.Port) > 0 {
			if n, err := strconv.Atoi(strings.Trim(string(s.Port), `"`)); err == nil && n > 0 && n < 65536 {
				c.Port = n
			}
		}
		c.Password = func(ctx context.Context) (string, error) {
			s, err := read(ctx)
			return s.Password, err
		}
	default:
		return Config{}, errors.New("db: CRAWLQ_DB_HOST is set but neither CRAWLQ_DB_IAM_AUTH=true nor CRAWLQ_DB_SECRET_ARN says how to authenticate")
	}
	return c, nil
}
