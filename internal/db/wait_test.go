package db_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"crawlq/internal/db"
	"crawlq/internal/dbtest"
	"crawlq/internal/logtest"
	"crawlq/internal/testwait"
)

// A process that starts while the database refuses connections for a reason that passes (here a
// role's connection limit: SQLSTATE 53300) says so, waits, and connects once the database takes
// connections again; a refusal that will not pass (a database that does not exist) fails at once.
func TestOpenWaitingWaitsOutRefusedConnections(t *testing.T) {
	t.Parallel()
	schema, dsn := dbtest.Schema(t)
	admin := dbtest.Open(t, dsn, 1)
	role := "r_" + strings.TrimPrefix(schema, "t_")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD 'pw' CONNECTION LIMIT 0`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a := dbtest.Open(t, dbtest.URL(t), 1)
		if _, err := a.Exec(context.Background(), `DROP ROLE `+role); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	wrong := *u // the test's own role, which the database takes
	wrong.Path = "/no_such_database"
	u.User = url.UserPassword(role, "pw")
	start := time.Now()
	if _, err := db.OpenWaiting(ctx, db.Config{URL: wrong.String()}, time.Minute, slog.New(&logtest.Records{})); err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("a database that does not exist: %v after %s; want an error at once", err, time.Since(start))
	}
	logs := &logtest.Records{}
	opened := make(chan error, 1)
	go func() {
		pool, err := db.OpenWaiting(ctx, db.Config{URL: u.String()}, time.Minute, slog.New(logs))
		if err == nil {
			pool.Close()
		}
		opened <- err
	}()
	refusedLogged := func() bool {
		for _, l := range logs.At(slog.LevelWarn) {
			if strings.Contains(l, "refuses connections") && strings.Contains(l, "53300") {
				return true
			}
		}
		return false
	}
	testwait.Until(t, "OpenWaiting logs the refusal (53300)", func() bool {
		select {
		case err := <-opened:
			t.Fatalf("OpenWaiting returned %v before the database took connections", err)
		default:
		}
		return refusedLogged()
	})
	if _, err := admin.Exec(ctx, `ALTER ROLE `+role+` CONNECTION LIMIT -1`); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("OpenWaiting: %v; want a pool once the database took connections", err)
	}
}
