package envconfig_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"crawlq/internal/awstest"
	"crawlq/internal/dbsetup"
	"crawlq/internal/dbtest"
	"crawlq/internal/envconfig"
)

// DBSetup reads the role's password from its secret, refuses a secret for another user, and
// Run reports a secret it cannot read instead of leaving the role without a login silently.
func TestDBSetupReadsAppSecret(t *testing.T) {
	awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, u := dbtest.Schema(t)
	awsCfg := awstest.Config(t)
	sm := secretsmanager.NewFromConfig(awsCfg)
	mk := func(name, body string) string {
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(body)})
		if err != nil {
			t.Fatal(err)
		}
		return *out.ARN
	}
	good := mk("app", `{"username":"crawlq_app","password":"pw1"}`)
	other := mk("other", `{"username":"someone","password":"pw2"}`)
	env := map[string]string{"DATABASE_URL": u, "CRAWLQ_DB_APP_SECRET_ARN": good}

	cfg, err := envconfig.DBSetup(ctx, envconfig.Map(env), awsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Pool.Close()
	if pw, err := cfg.AppPassword(ctx); err != nil || pw != "pw1" {
		t.Fatalf("password %q, %v", pw, err)
	}
	res, err := dbsetup.Handler(cfg)(ctx, nil)
	if err != nil || res.AppRole != "crawlq_app" {
		t.Fatalf("handler: %+v, %v", res, err)
	}

	env["CRAWLQ_DB_APP_SECRET_ARN"] = other
	cfg2, err := envconfig.DBSetup(ctx, envconfig.Map(env), awsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cfg2.Pool.Close()
	if _, err := dbsetup.Run(ctx, cfg2); !errors.Is(err, dbsetup.ErrConfig) || !strings.Contains(err.Error(), "CRAWLQ_DB_APP_USER") {
		t.Fatalf("secret of another user: %v, want ErrConfig naming CRAWLQ_DB_APP_USER", err)
	}

	env["CRAWLQ_DB_APP_SECRET_ARN"] = good + "-missing"
	cfg3, err := envconfig.DBSetup(ctx, envconfig.Map(env), awsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cfg3.Pool.Close()
	if _, err := dbsetup.Run(ctx, cfg3); err == nil || !strings.Contains(err.Error(), "read database secret") {
		t.Fatalf("missing secret: %v", err)
	}

	// The IAM login: no secret read, and not both.
	delete(env, "CRAWLQ_DB_APP_SECRET_ARN")
	env["CRAWLQ_DB_APP_IAM"] = "true"
	cfg4, err := envconfig.DBSetup(ctx, envconfig.Map(env), awsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cfg4.Pool.Close()
	if !cfg4.AppIAM || cfg4.AppPassword != nil {
		t.Errorf("CRAWLQ_DB_APP_IAM=true: AppIAM %v, a password reader %v", cfg4.AppIAM, cfg4.AppPassword != nil)
	}
	env["CRAWLQ_DB_APP_SECRET_ARN"] = good
	if _, err := envconfig.DBSetup(ctx, envconfig.Map(env), awsCfg); err == nil || !strings.Contains(err.Error(), "CRAWLQ_DB_APP_IAM") {
		t.Errorf("CRAWLQ_DB_APP_IAM with CRAWLQ_DB_APP_SECRET_ARN: %v, want an error naming CRAWLQ_DB_APP_IAM", err)
	}
}

// TestDBSetupPoolSize: the migrate step's pool has MigrateMaxConns connections unless
// CRAWLQ_DB_MAX_CONNS says otherwise, as every other process's pool.
func TestDBSetupPoolSize(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, u := dbtest.Schema(t)
	for conns, want := range map[string]int32{"": envconfig.MigrateMaxConns, "5": 5} {
		cfg, err := envconfig.DBSetup(ctx, envconfig.Map(map[string]string{"DATABASE_URL": u, "CRAWLQ_DB_MAX_CONNS": conns}), aws.Config{})
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.Pool.Config().MaxConns
		cfg.Pool.Close()
		if got != want {
			t.Errorf("CRAWLQ_DB_MAX_CONNS=%q: the migrate pool has %d connections, want %d", conns, got, want)
		}
	}
}
