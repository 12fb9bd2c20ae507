package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/testwait"
)

// build compiles a main package of the module into a temp dir.
func build(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	// Built as the runner image's binary is (make image), like every crawlq binary the tests
	// build: they then share one set of compiled packages.
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func secret(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func withPassword(t *testing.T, raw, pw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

// syncBuffer collects a process's stdout and stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Secrets in the environment (the database password inside DATABASE_URL, the AWS secret key and
// session token) never reach the logs or error output of the CLI, its worker, `crawlq local` or
// the Lambda function binaries: not when the connection fails, not in a normal run at debug level.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	cli := build(t, "crawlq/cmd/crawlq")
	apiFn := build(t, "crawlq/functions/api")
	pw := secret("pw-S3cr3t-")
	awsSecret := secret("awsSECRET")
	awsToken := secret("awsTOKEN")
	env := func(dbURL string) []string {
		return append(os.Environ(), "DATABASE_URL="+dbURL, "CRAWLQ_LOG_LEVEL=debug",
			"AWS_ACCESS_KEY_ID=AKIATESTTESTTESTTEST", "AWS_SECRET_ACCESS_KEY="+awsSecret, "AWS_SESSION_TOKEN="+awsToken,
			"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL=http://127.0.0.1:1")
	}
	check := func(what, out string) {
		t.Helper()
		for _, s := range []string{pw, awsSecret, awsToken} {
			if strings.Contains(out, s) {
				t.Errorf("%s logged a secret (%s...):\n%s", what, s[:8], out)
			}
		}
		if strings.TrimSpace(out) == "" {
			t.Errorf("%s printed nothing: the test would prove nothing", what)
		}
	}
	run := func(what string, dbURL string, bin string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env(dbURL)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s succeeded against an unreachable database", what)
		}
		check(what, string(out))
	}
	waitRetries := func(what string, dbURL string, bin string, args ...string) {
		t.Helper()
		var buf syncBuffer
		cmd := exec.Command(bin, args...)
		cmd.Env = env(dbURL)
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, what+" logs two retries", func() bool { return strings.Count(buf.String(), "retrying") >= 2 })
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		check(what, buf.String())
	}

	// Failing connections: nothing listening, and a database that does not exist.
	down := fmt.Sprintf("postgres://crawlq:%s@127.0.0.1:%d/crawlq?sslmode=disable", pw, closedPort(t))
	// The worker waits for a database that refuses connections (up to 5 minutes), logging each
	// try: stopped once it has logged two retries with the connection error, not at a timeout.
	waitRetries("crawlq worker (no server)", down, cli, "worker", "--queues", "crawl")
	run("crawlq schedule (no server)", down, cli, "schedule", "--spider", "demo")
	run("crawlq migrate (no server)", down, cli, "migrate")
	run("crawlq-api function (no server)", down, apiFn)
	_, schemaURL := dbtest.Schema(t)
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_db_" + pw[len(pw)-6:]
	run("crawlq worker (no database)", withPassword(t, u.String(), pw), cli, "worker", "--queues", "crawl")

	// Normal runs (the test server trusts loopback, so the password is accepted and ignored).
	good := withPassword(t, schemaURL, pw)
	if out, err := exec.Command(cli, "migrate", "--database-url", good).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	} else {
		check("crawlq migrate", string(out))
	}
	runFor := func(what string, args []string, during func()) {
		t.Helper()
		var buf syncBuffer
		cmd := exec.Command(cli, args...)
		cmd.Env = env(good)
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Until it has started and printed (its startup line, after it connected), not for a
		// while; what it prints later, up to its exit, Wait collects.
		testwait.Until(t, what+" prints", func() bool { return strings.TrimSpace(buf.String()) != "" })
		if during != nil {
			during()
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		check(what, buf.String())
	}
	if out, err := exec.Command(cli, "schedule", "--database-url", good, "--spider", "demo", "--arg", "base_url=http://127.0.0.1:1/").CombinedOutput(); err != nil {
		t.Fatalf("schedule: %v\n%s", err, out)
	}
	runFor("crawlq worker (normal run)", []string{"worker", "--queues", "crawl"}, nil)
	port := closedPort(t)
	runFor("crawlq local (normal run)", []string{"local", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--tick", "200ms"}, func() {
		// It prints before it listens (pushing the built-in spiders comes first): wait for the port.
		testwait.For(t, "crawlq local listens", func() (error, bool) {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				c.Close()
			}
			return err, err == nil
		})
		for _, body := range []string{`{"action":"schedule","spider":"nope"}`, `{"action":"daemonstatus"}`, `not json`} {
			resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/crawlq-api/invocations", port), "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("invoke crawlq local: %v", err)
				continue
			}
			resp.Body.Close()
		}
		// No wait: each call's log lines are written before its answer, and Wait collects them.
	})
}
