package dbsetup_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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

// Without RDS Proxy the application role logs in with IAM tokens only: AppIAM grants it
// rds_iam (RDS's role; created here to stand in for it) and LOGIN, and a later Run with a
// password (the stack moved back behind the proxy) revokes it again. A server without rds_iam
// is refused by name, and AppIAM with a password is a config error.
func TestRunGivesAppRoleIAMLogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, u := dbtest.Schema(t)
	admin := dbtest.Open(t, u, 2)
	member := func() bool {
		t.Helper()
		var in bool
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
			JOIN pg_roles a ON a.oid = m.member WHERE r.rolname = 'rds_iam' AND a.rolname = $1)`, dbsetup.DefaultAppRole).Scan(&in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam')`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists { // a server that is not RDS (and no earlier run made the stand-in)
		if _, err := dbsetup.Run(ctx, dbsetup.Config{Pool: admin, AppIAM: true}); !errors.Is(err, dbsetup.ErrConfig) || !strings.Contains(err.Error(), "rds_iam") {
			t.Errorf("AppIAM without rds_iam: %v, want ErrConfig naming rds_iam", err)
		}
		if _, err := admin.Exec(ctx, `DO $$ BEGIN CREATE ROLE rds_iam NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dbsetup.Run(ctx, dbsetup.Config{Pool: admin, AppIAM: true, AppPassword: func(context.Context) (string, error) { return "pw", nil }}); !errors.Is(err, dbsetup.ErrConfig) {
		t.Errorf("AppIAM with AppPassword: %v, want ErrConfig", err)
	}
	res, err := dbsetup.Run(ctx, dbsetup.Config{Pool: admin, AppIAM: true})
	if err != nil || res.AppRole != dbsetup.DefaultAppRole {
		t.Fatalf("AppIAM: %+v, %v", res, err)
	}
	var login bool
	if err := admin.QueryRow(ctx, `SELECT rolcanlogin FROM pg_roles WHERE rolname = $1`, dbsetup.DefaultAppRole).Scan(&login); err != nil || !login {
		t.Errorf("after AppIAM the role can log in: %v (%v)", login, err)
	}
	if !member() {
		t.Errorf("after AppIAM %s is not a member of rds_iam", dbsetup.DefaultAppRole)
	}
	if _, err := dbsetup.Run(ctx, dbsetup.Config{Pool: admin, AppPassword: func(context.Context) (string, error) { return "pw-from-secret", nil }}); err != nil {
		t.Fatal(err)
	}
	if member() {
		t.Errorf("after a password Run %s is still a member of rds_iam (RDS would refuse the proxy's password login)", dbsetup.DefaultAppRole)
	}
}
