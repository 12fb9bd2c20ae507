package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-exec/tfexec"

	"crawlq/internal/deploy"
)

func TestVarArgs(t *testing.T) {
	c := deploy.Config{
		Dir:  t.TempDir(),
		Vars: map[string]string{"name": "crawlq", "image_tag": "v1", "region": "eu-west-1"},
		Env:  map[string]string{"TF_VAR_region": "us-west-2", "TF_VAR_log_level": "debug"},
	}
	base := []string{"TF_VAR_alarm_email=ops@example.com", "HOME=/root", "AWS_ENDPOINT_URL=http://127.0.0.1:4566"}
	got := c.VarArgs(base)
	want := []string{
		"alarm_email=ops@example.com",
		"aws_endpoint=http://127.0.0.1:4566",
		"image_tag=v1",
		"log_level=debug",
		"name=crawlq",
		"region=eu-west-1", // Vars beat TF_VAR_ in Env
	}
	if !slices.Equal(got, want) {
		t.Fatalf("VarArgs = %v, want %v", got, want)
	}
}

func TestEndpointVarNotOverridden(t *testing.T) {
	c := deploy.Config{Dir: t.TempDir(), Vars: map[string]string{"aws_endpoint": ""}}
	vars := c.Variables([]string{"AWS_ENDPOINT_URL=http://x"})
	if vars["aws_endpoint"] != "" {
		t.Fatalf("an explicit aws_endpoint must win over AWS_ENDPOINT_URL, got %q", vars["aws_endpoint"])
	}
	if v := (deploy.Config{Dir: "x"}).Variables([]string{"HOME=/"}); len(v) != 0 {
		t.Fatalf("no endpoint, no vars: got %v", v)
	}
}

func TestEnviron(t *testing.T) {
	work := t.TempDir()
	c := deploy.Config{Dir: t.TempDir(), WorkDir: work, Env: map[string]string{"AWS_REGION": "eu-west-1", "TF_LOG": "debug"}}
	env := c.Environ([]string{"PATH=/bin", "AWS_REGION=us-east-1", "TF_VAR_x=1", "TF_CLI_ARGS=-no-color", "TF_IN_AUTOMATION=1"})
	if env["PATH"] != "/bin" || env["AWS_REGION"] != "eu-west-1" {
		t.Fatalf("env lost or not overridden: %v", env)
	}
	for _, k := range []string{"TF_VAR_x", "TF_CLI_ARGS", "TF_IN_AUTOMATION", "TF_LOG"} {
		if _, ok := env[k]; ok {
			t.Fatalf("%s must not be passed (terraform-exec manages it): %v", k, env)
		}
	}
	if env["TF_DATA_DIR"] != filepath.Join(work, ".terraform") {
		t.Fatalf("TF_DATA_DIR = %q", env["TF_DATA_DIR"])
	}
	if c.StatePath() != filepath.Join(work, "terraform.tfstate") {
		t.Fatalf("StatePath = %q", c.StatePath())
	}
	if got := (deploy.Config{Dir: "/src"}).StatePath(); got != "/src/terraform.tfstate" {
		t.Fatalf("default StatePath = %q", got)
	}
}

func TestValidate(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]deploy.Config{
		"no dir":      {},
		"missing dir": {Dir: filepath.Join(t.TempDir(), "nope")},
		"bad var":     {Dir: t.TempDir(), Vars: map[string]string{"a=b": "c"}},
		"bad env":     {Dir: t.TempDir(), Env: map[string]string{"": "c"}},
	} {
		if _, err := c.Plan(ctx); !errors.Is(err, deploy.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestFlattenOutputs(t *testing.T) {
	raw := func(s string) tfexec.OutputMeta { return tfexec.OutputMeta{Value: json.RawMessage(s)} }
	got, err := deploy.FlattenOutputs(map[string]tfexec.OutputMeta{
		"bucket":    raw(`"crawlq-items"`),
		"functions": raw(`{"api": "crawlq-api"}`),
		"count":     raw(`3`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["bucket"] != "crawlq-items" || got["functions"] != `{"api":"crawlq-api"}` || got["count"] != "3" {
		t.Fatalf("FlattenOutputs = %v", got)
	}
	if _, err := deploy.FlattenOutputs(map[string]tfexec.OutputMeta{"x": raw(`{`)}); err == nil {
		t.Fatal("bad JSON must be an error")
	}
}

// stateWithDB is a state of the stack holding only its database, protected, with a final
// snapshot and a marker attribute that must never reach the terminal.
const stateWithDB = `{
  "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "00000000-0000-0000-0000-000000000000",
  "outputs": {},
  "resources": [{
    "module": "module.database", "mode": "managed", "type": "aws_db_instance", "name": "this",
    "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
    "instances": [{"schema_version": 2, "attributes": {
      "id": "db-STATEMARKER", "identifier": "crawlq", "deletion_protection": true,
      "skip_final_snapshot": false, "final_snapshot_identifier": "crawlq-final-20261124185500"
    }}]
  }]
}`

// TestDestroyPrintsNoState: a refused destroy says why and prints nothing of the state
// (terraform-exec copies `terraform show -json`'s output to Stdout, which printed the whole
// state, every resource's attributes), and Kept names the final snapshot.
func TestDestroyPrintsNoState(t *testing.T) {
	tfBin, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform not found on PATH")
	}
	rc, err := exec.Command("../../scripts/tfrc.sh").Output()
	if err != nil {
		t.Fatalf("scripts/tfrc.sh: %v", err)
	}
	var out bytes.Buffer
	c := deploy.Config{Dir: "../../terraform", WorkDir: t.TempDir(), ExecPath: tfBin, Stdout: &out,
		Env: map[string]string{"TF_CLI_CONFIG_FILE": strings.TrimSpace(string(rc)), "CHECKPOINT_DISABLE": "1"}}
	if err := os.WriteFile(c.StatePath(), []byte(stateWithDB), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Init(ctx); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	_, err = c.Destroy(ctx)
	if !errors.Is(err, deploy.ErrDeletionProtected) || !strings.Contains(err.Error(), "module.database.aws_db_instance.this") {
		t.Fatalf("Destroy: %v, want ErrDeletionProtected naming the instance", err)
	}
	if strings.Contains(out.String(), "STATEMARKER") || strings.Contains(out.String(), `"values"`) {
		t.Fatalf("Destroy printed the state:\n%.2000s", out.String())
	}
	kept, err := c.Kept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Name != "crawlq-final-20261124185500" || !strings.Contains(kept[0].Delete, "delete-db-snapshot") {
		t.Fatalf("Kept = %+v, want the final snapshot", kept)
	}
	if strings.Contains(out.String(), "STATEMARKER") {
		t.Fatalf("Kept printed the state:\n%.2000s", out.String())
	}
}

// TestStateFacts: Protected and Kept read the state file without terraform, name each instance
// by its full address (module, index), and refuse a state of another format version, naming it.
func TestStateFacts(t *testing.T) {
	c := deploy.Config{Dir: ".", WorkDir: t.TempDir()}
	ctx := context.Background()
	if p, err := c.Protected(ctx); err != nil || len(p) != 0 {
		t.Fatalf("Protected without a state = %v, %v; want none", p, err)
	}
	counted := strings.Replace(stateWithDB, `"instances": [{`, `"instances": [{"index_key": 0, `, 1)
	if err := os.WriteFile(c.StatePath(), []byte(counted), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Protected(ctx); err != nil || len(p) != 1 || p[0] != "module.database.aws_db_instance.this[0]" {
		t.Fatalf("Protected = %v, %v; want module.database.aws_db_instance.this[0]", p, err)
	}
	old := strings.Replace(stateWithDB, `"version": 4`, `"version": 3`, 1)
	if err := os.WriteFile(c.StatePath(), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kept(ctx); err == nil || !strings.Contains(err.Error(), "format version 3") {
		t.Fatalf("Kept of a version 3 state: %v, want it refused naming the version", err)
	}
}
