// Package awstest starts a real local AWS emulator (moto_server) for tests.
//
// moto implements the AWS APIs crawlq calls (S3, Lambda, ECS, EventBridge Scheduler,
// IAM, ...) but never executes Lambda code or fires schedules, so tests run handlers
// in-process and check the calls they made. A missing moto_server fails the test loudly.
package awstest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/awsx"
)

// Moto starts moto_server on a free loopback port, points the environment of this test at
// it (AWS_ENDPOINT_URL, fake credentials, region us-east-1) and returns its endpoint.
// The server stops when the test ends. Tests that call Moto must not use t.Parallel,
// because they set process environment variables.
func Moto(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatal("moto_server not found on PATH: install it with `pip install 'moto[server]'` (make test does)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("awstest: pick port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("awstest: start moto_server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(endpoint + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("awstest: moto_server did not answer at %s within 30s: %v", endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	Env(t, endpoint)
	return endpoint
}

// Env points the AWS SDK of this process at endpoint with fake credentials.
func Env(t testing.TB, endpoint string) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL":            endpoint,
		"AWS_ACCESS_KEY_ID":           "testing",
		"AWS_SECRET_ACCESS_KEY":       "testing",
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  "us-east-1",
		"AWS_DEFAULT_REGION":          "us-east-1",
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	} {
		t.Setenv(k, v)
	}
}

// Config loads the AWS SDK configuration crawlq's code would load in this environment (awsx.Load:
// the emulator's endpoint, region and fake credentials that Moto or Env set), failing the test
// when it cannot.
func Config(t testing.TB) aws.Config {
	t.Helper()
	cfg, err := awsx.Load(context.Background())
	if err != nil {
		t.Fatalf("awstest: load AWS config: %v", err)
	}
	return cfg
}
