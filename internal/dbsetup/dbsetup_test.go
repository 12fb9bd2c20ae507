package dbsetup_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5/pgconn"

	"crawlq/internal/awstest"
	"crawlq/internal/dbsetup"
	"crawlq/internal/dbtest"
)

// asRole returns url with its user replaced by role.
func asRole(t *testing.T, raw, role string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// The migrate step gives the application role its login, and the role can work the queue's
// tables but not change the schema or read the migration table's neighbours it was not given.
func TestRunGivesAppRoleLeastPrivilege(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema, u := dbtest.Schema(t)
	admin := dbtest.Open(t, u, 2)

	res, err := dbsetup.Run(ctx, dbsetup.Config{Pool: admin, AppPassword: func(context.Context) (string, error) { return "pw-from-secret", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if res.AppRole != dbsetup.DefaultAppRole || len(res.Applied) != 0 {
		t.Fatalf("result %+v: want the role set and nothing left to migrate (dbtest migrated)", res)
	}
	var login, super, createRole, createDB bool
	if err := admin.QueryRow(ctx, `SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = $1`,
		dbsetup.DefaultAppRole).Scan(&login, &super, &createRole, &createDB); err != nil {
		t.Fatal(err)
	}
	if !login || super || createRole || createDB {
		t.Fatalf("role: login=%v super=%v createrole=%v createdb=%v; want only login", login, super, createRole, createDB)
	}

	app := dbtest.Open(t, asRole(t, u, dbsetup.DefaultAppRole), 2)
	var user string
	if err := app.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != dbsetup.DefaultAppRole {
		t.Fatalf("connected as %q (%v)", user, err)
	}
	// Rows: every crawlq table is readable and writable.
	for _, q := range []string{
		`SELECT count(*) FROM crawlq_job`,
		`SELECT count(*) FROM crawlq_migration`,
		`INSERT INTO crawlq_worker (id, queue, kind, jobs_done) VALUES ('w1', 'q', 'test', 0)`,
		`UPDATE crawlq_worker SET jobs_done = 1 WHERE id = 'w1'`,
		`DELETE FROM crawlq_worker WHERE id = 'w1'`,
	} {
		if _, err := app.Exec(ctx, q); err != nil {
			t.Errorf("%s as %s: %v", q, dbsetup.DefaultAppRole, err)
		}
	}
	// Schema: nothing.
	for _, q := range []string{
		`CREATE TABLE ` + schema + `.evil (x int)`,
		`DROP TABLE crawlq_job`,
		`ALTER TABLE crawlq_job ADD COLUMN evil int`,
		`TRUNCATE crawlq_job`,
		`CREATE ROLE evil`,
	} {
		_, err := app.Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "42501" && !strings.Contains(pe.Message, "must be owner")) {
			t.Errorf("%s as %s: %v, want permission denied", q, dbsetup.DefaultAppRole, err)
		}
	}
}

// FromEnv reads the role's password from its secret, refuses a secret for another user, and
// Run reports a secret it cannot read instead of leaving the role without a login silently.
func TestFromEnvReadsAppSecret(t *testing.T) {
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
	getenv := func(k string) string { return env[k] }

	cfg, err := dbsetup.FromEnv(ctx, getenv, awsCfg)
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
	cfg2, err := dbsetup.FromEnv(ctx, getenv, awsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cfg2.Pool.Close()
	if _, err := dbsetup.Run(ctx, cfg2); !errors.Is(err, dbsetup.ErrConfig) || !strings.Contains(err.Error(), "CRAWLQ_DB_APP_USER") {
		t.Fatalf("secret of another user: %v, want ErrConfig naming CRAWLQ_DB_APP_USER", err)
	}

	env["CRAWLQ_DB_APP_SECRET_ARN"] = good + "-missing"
	cfg3, err := dbsetup.FromEnv(ctx, getenv, awsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cfg3.Pool.Close()
	if _, err := dbsetup.Run(ctx, cfg3); err == nil || !strings.Contains(err.Error(), "read database secret") {
		t.Fatalf("missing secret: %v", err)
	}
}
