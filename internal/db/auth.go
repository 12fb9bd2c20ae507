package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// secret is the JSON shape RDS and Secrets Manager use for database credentials. Host, port and
// dbname are optional: the values configured (CRAWLQ_DB_*) win when set.
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

// ValidExecMode reports whether mode is one Config.ExecMode accepts ("" included).
func ValidExecMode(mode string) bool {
	_, err := execMode(mode)
	return err == nil
}

// IAMPassword returns a Config.Password that builds an IAM auth token for user at host:port for
// every new connection (tokens expire after 15 minutes), signed with awsCfg's credentials and
// region.
func IAMPassword(awsCfg aws.Config, host string, port int, user string) (func(context.Context) (string, error), error) {
	if awsCfg.Region == "" || awsCfg.Credentials == nil {
		return nil, errors.New("db: IAM auth needs an AWS region and credentials")
	}
	endpoint := net.JoinHostPort(host, strconv.Itoa(port))
	region, creds := awsCfg.Region, awsCfg.Credentials
	return func(ctx context.Context) (string, error) {
		tok, err := auth.BuildAuthToken(ctx, endpoint, region, user, creds)
		if err != nil {
			return "", fmt.Errorf("build IAM auth token: %w", err)
		}
		return tok, nil
	}, nil
}

// Secret is what a database credentials secret holds besides the password.
type Secret struct {
	Username string
	DBName   string // "" when the secret names none
	Port     int    // 0 when the secret names none (or an unusable one)
}

// SecretPassword reads the Secrets Manager secret arn once (so a missing or unreadable secret
// fails at start-up rather than at the first query) and returns what it holds and a
// Config.Password that reads it again for every new connection, so a rotated password is
// picked up.
func SecretPassword(ctx context.Context, awsCfg aws.Config, arn string) (Secret, func(context.Context) (string, error), error) {
	sm := secretsmanager.NewFromConfig(awsCfg)
	s, err := readSecret(ctx, sm, arn)
	if err != nil {
		return Secret{}, nil, fmt.Errorf("db: %w", err)
	}
	out := Secret{Username: s.Username, DBName: s.DBName}
	if len(s.Port) > 0 {
		if n, err := strconv.Atoi(strings.Trim(string(s.Port), `"`)); err == nil && n > 0 && n < 65536 {
			out.Port = n
		}
	}
	return out, func(ctx context.Context) (string, error) {
		s, err := readSecret(ctx, sm, arn)
		return s.Password, err
	}, nil
}
