package envconfig_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"crawlq/internal/awstest"
	"crawlq/internal/db"
	"crawlq/internal/dbtest"
	"crawlq/internal/envconfig"
)

func TestDBErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := aws.Config{Region: "us-east-1"}
	for env, want := range map[string]map[string]string{
		"no database configured": {},
		"CRAWLQ_DB_PORT":         {"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_PORT": "x", "CRAWLQ_DB_IAM_AUTH": "true"},
		"CRAWLQ_DB_EXEC_MODE":    {"DATABASE_URL": "postgres://x", "CRAWLQ_DB_EXEC_MODE": "fast"},
		"how to authenticate":    {"CRAWLQ_DB_HOST": "h"},
		"CRAWLQ_DB_IAM_AUTH":     {"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_IAM_AUTH": "maybe"},
		"CRAWLQ_DB_USER":         {"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_IAM_AUTH": "true"},
		"CRAWLQ_DB_MAX_CONNS":    {"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_USER": "u", "CRAWLQ_DB_IAM_AUTH": "true", "CRAWLQ_DB_MAX_CONNS": "0"},
		// The RDS roots come over HTTPS only (the fetch itself is tested in internal/db).
		"CRAWLQ_DB_CA_URL": {"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_USER": "u", "CRAWLQ_DB_IAM_AUTH": "true", "CRAWLQ_DB_CA_URL": "http://truststore.example/b.pem"},
	} {
		if _, err := envconfig.DB(ctx, envconfig.Map(want), cfg); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%v: got %v, want an error mentioning %s", want, err, env)
		}
	}
	c, err := envconfig.DB(ctx, envconfig.Map(map[string]string{"DATABASE_URL": "postgres://u@h/d", "CRAWLQ_DB_EXEC_MODE": "simple"}), cfg)
	if err != nil || c.URL != "postgres://u@h/d" || c.ExecMode != "simple" {
		t.Fatalf("URL config: %+v, %v", c, err)
	}
	// The connection cap without RDS Proxy; a CA URL is not fetched for a host without TLS.
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}, nil
	})
	c, err = envconfig.DB(ctx, envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_USER": "u", "CRAWLQ_DB_IAM_AUTH": "true",
		"CRAWLQ_DB_MAX_CONNS": "4", "CRAWLQ_DB_TLS": "false", "CRAWLQ_DB_CA_URL": "http://never.fetched/b.pem"}), cfg)
	if err != nil || c.MaxConns != 4 || c.CAPEM != nil {
		t.Fatalf("CRAWLQ_DB_MAX_CONNS=4: %+v, %v", c, err)
	}
}

func TestDBIAM(t *testing.T) {
	t.Parallel()
	cfg := aws.Config{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}}
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}, nil
	})
	c, err := envconfig.DB(context.Background(), envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "proxy.example", "CRAWLQ_DB_PORT": "6432",
		"CRAWLQ_DB_USER": "app", "CRAWLQ_DB_IAM_AUTH": "true", "CRAWLQ_DB_SECRET_ARN": "arn:ignored"}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !c.TLS || c.Port != 6432 || c.Name != "crawlq" || c.User != "app" || c.Password == nil {
		t.Fatalf("config: %+v", c)
	}
	tok, err := c.Password(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "proxy.example:6432?Action=connect") || !strings.Contains(tok, "DBUser=app") || !strings.Contains(tok, "X-Amz-Signature=") {
		t.Fatalf("token %q", tok)
	}
	pc, err := c.PoolConfig()
	if err != nil || pc.BeforeConnect == nil {
		t.Fatalf("pool config: %v", err)
	}
}

// TestDBSecret reads credentials from a Secrets Manager secret in moto and connects to the
// test Postgres with them.
func TestDBSecret(t *testing.T) {
	_, schemaURL := dbtest.Schema(t)
	awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if pw == "" {
		pw = "unused-by-trust-auth"
	}
	sm := secretsmanager.NewFromConfig(cfg)
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("crawlq-db"),
		SecretString: aws.String(`{"username":"` + u.User.Username() + `","password":"` + pw + `","port":"` + u.Port() + `","dbname":"` + strings.TrimPrefix(u.Path, "/") + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := envconfig.DB(ctx, envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": u.Hostname(), "CRAWLQ_DB_SECRET_ARN": aws.ToString(out.ARN),
		"CRAWLQ_DB_TLS": "false"}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.User != u.User.Username() || c.Port == 5432 && u.Port() != "5432" {
		t.Fatalf("config from secret: %+v", c)
	}
	pool, err := db.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var one int
	if err := pool.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query: %v", err)
	}
	if _, err := envconfig.DB(ctx, envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_SECRET_ARN": "missing"}), cfg); err == nil ||
		!strings.Contains(err.Error(), "secret") {
		t.Fatalf("missing secret: %v", err)
	}
}

func TestDBCAFileMissing(t *testing.T) {
	t.Parallel()
	_, err := envconfig.DB(context.Background(), envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_IAM_AUTH": "true",
		"CRAWLQ_DB_USER": "u", "CRAWLQ_DB_CA_FILE": "/nonexistent/ca.pem"}), aws.Config{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}})
	if err == nil || !strings.Contains(err.Error(), "CRAWLQ_DB_CA_FILE") {
		t.Fatalf("got %v, want an error naming CRAWLQ_DB_CA_FILE", err)
	}
}
