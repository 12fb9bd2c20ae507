//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/db"
	"crawlq/internal/migrate"
)

// pgServer is a throwaway PostgreSQL cluster owned by one scenario, so stopping and starting it
// disturbs nothing else on the machine (not the shared server `make test` uses).
type pgServer struct {
	bindir, data, log string
	port              int
	asRoot            bool
}

func pgBindir(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p)
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(m) == 0 {
		t.Fatal("PostgreSQL server binaries (pg_ctl, initdb) not found: install Debian's postgresql package (scripts/localpg.sh does)")
	}
	return filepath.Dir(m[len(m)-1])
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPG initdbs a cluster in a temp dir (as the "postgres" user when running as root, since
// initdb refuses root) on a free port, starts it and creates database crawlq, migrated.
func startPG(t *testing.T) *pgServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "crawlq-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &pgServer{bindir: pgBindir(t), data: filepath.Join(dir, "data"), log: filepath.Join(dir, "log"),
		port: freePort(t), asRoot: os.Geteuid() == 0}
	if s.asRoot {
		if _, err := user.Lookup("postgres"); err != nil {
			// As scripts/localpg.sh does: initdb refuses root, so an unprivileged user owns the cluster.
			exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres").Run()
		}
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("running as root needs a \"postgres\" user to own the cluster, and useradd failed: ", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		if err := os.Chown(dir, uid, -1); err != nil {
			t.Fatal(err)
		}
		for p := dir; p != "/"; p = filepath.Dir(p) {
			if st, err := os.Stat(p); err == nil {
				os.Chmod(p, st.Mode().Perm()|0o001)
			}
		}
	}
	t.Cleanup(func() {
		s.ctl("stop", "-m", "immediate")
		os.RemoveAll(dir)
	})
	if out, err := s.owner(filepath.Join(s.bindir, "initdb"), "-D", s.data, "-U", "crawlq", "--auth=trust",
		"-E", "UTF8", "--no-locale").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = ''\nmax_connections = 200\n"+
		"shared_buffers = 128MB\nfsync = on\nsynchronous_commit = on\n", s.port)
	if err := appendFile(filepath.Join(s.data, "postgresql.conf"), conf); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := db.Open(ctx, db.Config{URL: s.url("postgres"), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE DATABASE crawlq"); err != nil {
		t.Fatal(err)
	}
	pool := s.pool(t, 2)
	if _, err := migrate.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return s
}

func appendFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *pgServer) owner(name string, args ...string) *exec.Cmd {
	if s.asRoot {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func (s *pgServer) ctl(args ...string) ([]byte, error) {
	all := append([]string{"-D", s.data, "-w", "-t", "60"}, args...)
	return s.owner(filepath.Join(s.bindir, "pg_ctl"), all...).CombinedOutput()
}

func (s *pgServer) start(t *testing.T) {
	t.Helper()
	if out, err := s.ctl("-l", s.log, "start"); err != nil {
		log, _ := os.ReadFile(s.log)
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, tail(string(log), 20))
	}
}

// stopFast is `pg_ctl stop -m fast`: every session is terminated, as in a failover or restart.
func (s *pgServer) stopFast(t *testing.T) {
	t.Helper()
	if out, err := s.ctl("stop", "-m", "fast"); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// stopImmediate is `pg_ctl stop -m immediate`: the server quits without a shutdown checkpoint, as
// in a crash; it recovers from its WAL when started again.
func (s *pgServer) stopImmediate(t *testing.T) {
	t.Helper()
	if out, err := s.ctl("stop", "-m", "immediate"); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (s *pgServer) url(dbname string) string {
	return fmt.Sprintf("postgres://crawlq@127.0.0.1:%d/%s?sslmode=disable", s.port, dbname)
}

func (s *pgServer) pool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := db.Open(ctx, db.Config{URL: s.url("crawlq"), MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
