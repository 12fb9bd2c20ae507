package terraform_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"crawlq/internal/awstest"
	"crawlq/internal/cli"
	"crawlq/internal/deploy"
)

// stack is one emulated account (a moto server of its own) holding the root module's
// deployment, driven through the CLI as a user drives it. Each test that applies gets its own,
// so the stack tests can run in separate processes side by side (scripts/stack-exec.sh runs the
// package's one test binary twice): they spend their time in the AWS provider's fixed RDS polls
// (about 80 s per create, modify and delete, even on moto), not on the CPU.
//
// Workarounds for moto, and why:
//   - emulator_workarounds=true: moto reads back two things differently from AWS (see the
//     variable's description), so without it no second plan would ever be empty. The plan
//     checks run on the configuration without it.
//   - moto's Lambda runs no code without Docker; /moto-api/config {"lambda":{"use_docker":false}}
//     makes an invocation return a canned success, so the apply's aws_lambda_invocation of the
//     migrate function completes. The migrate handler itself runs in the contract test.
//   - --build-dir with stub zips and --push-image=false: the zips' code never runs in moto,
//     and moto has no registry to push the image to (the image is built and run in the
//     contract test instead).
type stack struct {
	t   *testing.T
	ctx context.Context
	// base is the configuration the CLI's flags describe, for reading the state and planning.
	base deploy.Config
	// flags are what deploy and destroy share: --dir, --work-dir, --build-dir and the --var's.
	flags  []string
	cliEnv cli.Env
	// out holds what the last CLI command printed.
	out *bytes.Buffer
	log string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	tfBin := setup(t)
	endpoint := awstest.Moto(t)
	// Generous: on a loaded machine one apply to moto takes several minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	t.Cleanup(cancel)
	resp, err := http.Post(endpoint+"/moto-api/config", "application/json", strings.NewReader(`{"lambda":{"use_docker":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	log, err := os.Create(filepath.Join(t.TempDir(), "terraform.log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, ctx: ctx, out: &bytes.Buffer{}, log: log.Name()}
	s.base = deploy.Config{
		Dir:      ".",
		WorkDir:  t.TempDir(),
		ExecPath: tfBin,
		Stdout:   log,
		Vars: map[string]string{
			"build_dir":            dummyZips(t),
			"emulator_workarounds": "true",
			"scrapyd_api":          "true",
		},
	}
	s.flags = []string{"--dir", ".", "--work-dir", s.base.WorkDir, "--build-dir", s.base.Vars["build_dir"], "--var", "emulator_workarounds=true", "--var", "scrapyd_api=true"}
	s.cliEnv = cli.Env{Stdout: io.MultiWriter(log, s.out), Stderr: io.MultiWriter(log, s.out), Getenv: os.Getenv}
	// No destroy at the end: the account is the test's own moto server, gone with the test; a
	// destroy would hold a passed test ~80 s in the provider's RDS polls, and a failed one's
	// message until it returned.
	t.Cleanup(func() { log.Close() })
	return s
}

// fail stops the test with the tail of terraform's output.
func (s *stack) fail(format string, args ...any) {
	s.t.Helper()
	failWithLog(s.t, s.log, format, args...)
}

// failWithLog stops t with the tail of terraform's output in the file log.
func failWithLog(t *testing.T, log, format string, args ...any) {
	t.Helper()
	b, _ := os.ReadFile(log)
	if len(b) > 20000 {
		b = b[len(b)-20000:]
	}
	t.Fatalf(format+"\n--- terraform output (tail) ---\n%s", append(args, b)...)
}

// cli runs crawlq with args and returns its exit code; s.out holds what it printed.
func (s *stack) cli(args ...string) int {
	s.out.Reset()
	return cli.Main(s.ctx, args, s.cliEnv)
}

// deploy runs `crawlq deploy` with the shared flags, extra and --push-image=false (the
// emulator has no registry), fails the test unless it succeeds, and returns the outputs it
// printed (read from the state right after the apply, `terraform output`).
func (s *stack) deploy(extra ...string) map[string]string {
	s.t.Helper()
	args := append(append([]string{"deploy"}, s.flags...), "--push-image=false")
	if code := s.cli(append(args, extra...)...); code != 0 {
		s.fail("crawlq %s exited %d", strings.Join(append(args, extra...), " "), code)
	}
	out := printedOutputs(s.out.String())
	if len(out) == 0 {
		s.fail("crawlq deploy printed no outputs:\n%s", tail(s.out.String()))
	}
	return out
}

// printedOutputs reads the outputs block `crawlq deploy` ends with ("outputs:", then
// "  name = value" lines).
func printedOutputs(printed string) map[string]string {
	_, block, ok := strings.Cut(printed, "\noutputs:\n")
	if !ok {
		return nil
	}
	out := map[string]string{}
	for line := range strings.Lines(block) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " = ")
		if !ok || !strings.HasPrefix(k, "  ") {
			break
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// outputs returns the outputs of the deployed state.
func (s *stack) outputs() map[string]string {
	s.t.Helper()
	out, err := s.base.Outputs(s.ctx)
	if err != nil {
		s.fail("outputs: %v", err)
	}
	return out
}

// fill leaves in the deployed stack what a default deploy and a crawl leave: the runner image
// in the repository (put through the ECR API; moto has no registry to push to) and items, in
// several versions, in the bucket. A destroy must remove both.
func (s *stack) fill(outputs map[string]string) {
	s.t.Helper()
	url := outputs["ecr_repository_url"]
	fill(s.t, s.ctx, url[strings.LastIndex(url, "/")+1:], outputs["items_bucket"])
}

// destroy runs `crawlq destroy --yes` on a stack without deletion protection whose
// final_snapshot output is snap, and checks what a user sees: it finishes, prints neither the
// state nor the plan, names the final snapshot it keeps, and the account holds nothing of the
// stack's afterwards but that snapshot, which it returns.
func (s *stack) destroy(what, snap string) string {
	s.t.Helper()
	if !strings.HasPrefix(snap, "crawlq-final-") {
		s.fail("%s: final_snapshot output %q", what, snap)
	}
	if code := s.cli(append(append([]string{"destroy"}, s.flags...), "--yes")...); code != 0 {
		s.fail("%s: crawlq destroy --yes exited %d:\n%s", what, code, s.out.String())
	}
	// Neither the state (JSON) nor the destroy plan (every attribute of every resource,
	// ~250 KB): a few lines, the outcome and where the full output is.
	if o := s.out.String(); strings.Contains(o, `"root_module"`) || strings.Contains(o, "will be destroyed") || len(o) > 8192 {
		s.t.Errorf("%s: crawlq destroy printed the state or the plan (%d bytes of output):\n%.3000s", what, len(o), o)
	}
	if !strings.Contains(s.out.String(), "Destroy complete!") {
		s.t.Errorf("%s: crawlq destroy does not say it completed:\n%s", what, tail(s.out.String()))
	}
	if !strings.Contains(s.out.String(), "kept: final DB snapshot "+snap) {
		s.t.Errorf("%s: destroy does not say it keeps %s:\n%s", what, snap, tail(s.out.String()))
	}
	left, snaps := afterDestroy(s.t, s.ctx)
	if len(left) > 0 {
		s.t.Errorf("%s: destroy left %v", what, left)
	}
	if !slices.Contains(snaps, snap) {
		s.t.Errorf("%s: snapshots after the destroy: %v, want %s among them", what, snaps, snap)
	}
	return snap
}

// TestStackDeployDestroyCycles deploys the stack without deletion protection, fills it and
// destroys it, then deploys it again under the same name in the same account: the second deploy
// finds every name free again, and the final snapshot its destroy would take has a name of its
// own, not the first one's, which is still kept (RDS refuses a delete whose final snapshot name
// is taken). The second stack is not destroyed: the first destroy shows what a destroy does, and
// a second one would add only the provider's ~80 s RDS poll.
func TestStackDeployDestroyCycles(t *testing.T) {
	s := newStack(t)
	first := s.deploy("--var", "db_deletion_protection=false")
	s.fill(first)
	kept := s.destroy("first cycle", first["final_snapshot"])

	next := s.deploy("--var", "db_deletion_protection=false")["final_snapshot"]
	if !strings.HasPrefix(next, "crawlq-final-") || next == kept {
		t.Errorf("the second deploy's final snapshot is %q, the first one's %q: want a name of its own", next, kept)
	}
	if got := snapshots(t, s.ctx); !slices.Contains(got, kept) || slices.Contains(got, next) {
		t.Errorf("snapshots after the second deploy: %v, want %s kept and %s free", got, kept, next)
	}
}
