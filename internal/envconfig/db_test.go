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
		if _, err := envconfig.DB(ctx, envconfig.Map(want), cfg, 0); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%v: got %v, want an error mentioning %s", want, err, env)
		}
	}
	c, err := envconfig.DB(ctx, envconfig.Map(map[string]string{"DATABASE_URL": "postgres://u@h/d", "CRAWLQ_DB_EXEC_MODE": "simple"}), cfg, 0)
	if err != nil || c.URL != "postgres://u@h/d" || c.ExecMode != "simple" {
		t.Fatalf("URL config: %+v, %v", c, err)
	}
	// The connection cap without RDS Proxy; a CA URL is not fetched for a host without TLS.
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}, nil
	})
	c, err = envconfig.DB(ctx, envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_USER": "u", "CRAWLQ_DB_IAM_AUTH": "true",
		"CRAWLQ_DB_MAX_CONNS": "4", "CRAWLQ_DB_TLS": "false", "CRAWLQ_DB_CA_URL": "http://never.fetched/b.pem"}), cfg, 0)
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
		"CRAWLQ_DB_USER": "app", "CRAWLQ_DB_IAM_AUTH": "true", "CRAWLQ_DB_SECRET_ARN": "arn:ignored"}), cfg, 0)
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
		"CRAWLQ_DB_TLS": "false"}), cfg, 0)
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
	if _, err := envconfig.DB(ctx, envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_SECRET_ARN": "missing"}), cfg, 0); err == nil ||
		!strings.Contains(err.Error(), "secret") {
		t.Fatalf("missing secret: %v", err)
	}
}

func TestDBCAFileMissing(t *testing.T) {
	t.Parallel()
	_, err := envconfig.DB(context.Background(), envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_IAM_AUTH": "true",
		"CRAWLQ_DB_USER": "u", "CRAWLQ_DB_CA_FILE": "/nonexistent/ca.pem"}), aws.Config{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}}, 0)
	if err == nil || !strings.Contains(err.Error(), "CRAWLQ_DB_CA_FILE") {
		t.Fatalf("got %v, want an error naming CRAWLQ_DB_CA_FILE", err)
	}
}

// TestDBReadsWithoutNetwork: reading the database settings does no network I/O: the CA bundle of
// CRAWLQ_DB_CA_URL is fetched where the pool is opened (db.Open), so here a URL nothing answers
// at is only recorded, and its shape checked.
func TestDBReadsWithoutNetwork(t *testing.T) {
	t.Parallel()
	cfg := aws.Config{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}}
	const never = "https://127.0.0.1:1/rds-bundle.pem"
	c, err := envconfig.DB(context.Background(), envconfig.Map(map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_IAM_AUTH": "true",
		"CRAWLQ_DB_USER": "u", "CRAWLQ_DB_CA_URL": never}), cfg, 0)
	if err != nil || c.CAURL != never || c.CAPEM != nil {
		t.Fatalf("CRAWLQ_DB_CA_URL=%s: %+v, %v; want it recorded, not fetched", never, c, err)
	}
}

// TestDBMaxConnsDefault: the caller's default pool size applies when CRAWLQ_DB_MAX_CONNS is unset,
// and the variable overrides it, a URL's database too.
func TestDBMaxConnsDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want int32
	}{
		{map[string]string{"DATABASE_URL": "postgres://u@h/d"}, 7},
		{map[string]string{"DATABASE_URL": "postgres://u@h/d", "CRAWLQ_DB_MAX_CONNS": "5"}, 5},
	} {
		got, err := envconfig.DB(context.Background(), envconfig.Map(c.env), aws.Config{}, 7)
		if err != nil || got.MaxConns != c.want {
			t.Errorf("%v with default 7: MaxConns %d, %v; want %d", c.env, got.MaxConns, err, c.want)
		}
	}
}
