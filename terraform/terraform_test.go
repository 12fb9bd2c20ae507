// Package terraform_test checks the Terraform stack: formatting and validity, a full
// apply / re-plan / destroy against moto, and security and metric-name rules on the plan JSON.
package terraform_test

import (
	"archive/zip"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"crawlq/internal/awstest"
	"crawlq/internal/cli"
	"crawlq/internal/deploy"
	"crawlq/internal/metrics"
)

// setup finds terraform and writes the CLI config for the offline provider mirror.
func setup(t *testing.T) string {
	t.Helper()
	tfBin, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform not found on PATH: install Terraform 1.11")
	}
	out, err := exec.Command("../scripts/tfrc.sh").Output()
	if err != nil {
		t.Fatalf("scripts/tfrc.sh (provider mirror): %v", err)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", strings.TrimSpace(string(out)))
	t.Setenv("CHECKPOINT_DISABLE", "1")
	return tfBin
}

func TestFmtAndValidate(t *testing.T) {
	tfBin := setup(t)
	if out, err := exec.Command(tfBin, "fmt", "-check", "-recursive", "-diff").CombinedOutput(); err != nil {
		t.Fatalf("terraform fmt -check -recursive: %v\n%s", err, out)
	}
	cfg := deploy.Config{Dir: ".", WorkDir: t.TempDir(), ExecPath: tfBin}
	if err := cfg.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tfBin, "validate", "-no-color")
	cmd.Env = append(os.Environ(), "TF_DATA_DIR="+filepath.Join(cfg.WorkDir, ".terraform"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("terraform validate: %v\n%s", err, out)
	}
}

// dummyZips writes the four function zips (a bootstrap file each): moto stores code, never runs it.
func dummyZips(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, fn := range []string{"api", "worker", "dispatch", "metrics"} {
		f, err := os.Create(filepath.Join(dir, fn+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		zw := zip.NewWriter(f)
		w, err := zw.Create("bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("#!/bin/sh\n"))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return dir
}

// TestStackOnEmulator applies the whole root module to moto, re-plans (nothing may change),
// checks the plan JSON of the real-AWS configuration, and destroys.
func TestStackOnEmulator(t *testing.T) {
	tfBin := setup(t)
	endpoint := awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	log, err := os.Create(filepath.Join(t.TempDir(), "terraform.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	base := deploy.Config{
		Dir:      ".",
		WorkDir:  t.TempDir(),
		ExecPath: tfBin,
		Stdout:   log,
		Vars: map[string]string{
			"build_dir":              dummyZips(t),
			"db_deletion_protection": "false",
			"emulator_workarounds":   "true",
		},
	}
	fail := func(format string, args ...any) {
		t.Helper()
		b, _ := os.ReadFile(log.Name())
		if len(b) > 20000 {
			b = b[len(b)-20000:]
		}
		t.Fatalf(format+"\n--- terraform output (tail) ---\n%s", append(args, b)...)
	}

	var destroyed bool
	t.Cleanup(func() {
		if !destroyed {
			_ = base.Destroy(context.Background())
		}
	})

	// Deploy through the CLI, as a user would: `crawlq deploy` (prebuilt zips, no image push
	// against the emulator), then read the outputs it left in the state.
	cliEnv := cli.Env{Stdout: log, Stderr: log, Getenv: os.Getenv}
	if code := cli.Main(ctx, []string{"deploy", "--dir", ".", "--work-dir", base.WorkDir, "--build-dir", base.Vars["build_dir"],
		"--var", "db_deletion_protection=false", "--var", "emulator_workarounds=true", "--push-image=false"}, cliEnv); code != 0 {
		fail("crawlq deploy against moto exited %d", code)
	}
	outputs, err := base.Outputs(ctx)
	if err != nil {
		fail("outputs: %v", err)
	}
	if outputs["ecs_cluster"] != "crawlq" || !strings.Contains(outputs["function_names"], `"worker":"crawlq-worker"`) ||
		outputs["items_bucket"] == "" || outputs["database_endpoint"] == "" || outputs["ecr_repository_url"] == "" ||
		!strings.Contains(outputs["dashboard_url"], "dashboards:name=crawlq") {
		fail("unexpected outputs: %v", outputs)
	}
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint %q", endpoint)
	}

	plan, changes, err := base.PlanJSON(ctx)
	if err != nil {
		fail("second plan: %v", err)
	}
	if changes {
		var diff []string
		for _, rc := range plan.ResourceChanges {
			if !rc.Change.Actions.NoOp() && !rc.Change.Actions.Read() {
				diff = append(diff, rc.Address+" "+strings.Join(actionStrings(rc.Change.Actions), ","))
			}
		}
		fail("second plan is not empty: %v", diff)
	}
	checkPlan(t, plan)

	// The configuration real AWS gets (no emulator workarounds), planned over the applied state
	// without refreshing so that every value is known.
	honest := base
	honest.Vars = maps.Clone(base.Vars)
	honest.Vars["emulator_workarounds"] = "false"
	honest.NoRefresh = true
	plan, _, err = honest.PlanJSON(ctx)
	if err != nil {
		fail("plan without emulator workarounds: %v", err)
	}
	checkPlan(t, plan)
	pg := resources(plan, "aws_db_parameter_group")
	if len(pg) != 1 || !strings.Contains(mustJSON(t, pg[0].AttributeValues["parameter"]), "rds.force_ssl") {
		t.Errorf("the real parameter group must force SSL: %v", pg)
	}

	destroyArgs := []string{"destroy", "--dir", ".", "--work-dir", base.WorkDir, "--build-dir", base.Vars["build_dir"],
		"--var", "db_deletion_protection=false", "--var", "emulator_workarounds=true"}
	if code := cli.Main(ctx, destroyArgs, cliEnv); code != 2 {
		fail("crawlq destroy without --yes exited %d, want 2 (refused)", code)
	}
	if code := cli.Main(ctx, append(destroyArgs, "--yes"), cliEnv); code != 0 {
		fail("crawlq destroy --yes exited %d", code)
	}
	destroyed = true
}

func actionStrings(a tfjson.Actions) []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = string(x)
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// resources returns every planned resource of a type, in all modules.
func resources(plan *tfjson.Plan, typ string) []*tfjson.StateResource {
	var out []*tfjson.StateResource
	var walk func(m *tfjson.StateModule)
	walk = func(m *tfjson.StateModule) {
		if m == nil {
			return
		}
		for _, r := range m.Resources {
			if r.Type == typ && r.Mode == tfjson.ManagedResourceMode {
				out = append(out, r)
			}
		}
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	if plan.PlannedValues != nil {
		walk(plan.PlannedValues.RootModule)
	}
	return out
}

func str(t *testing.T, r *tfjson.StateResource, attr string) string {
	t.Helper()
	s, ok := r.AttributeValues[attr].(string)
	if !ok || s == "" {
		t.Fatalf("%s.%s is not a known string: %#v", r.Address, attr, r.AttributeValues[attr])
	}
	return s
}

type policyDoc struct {
	Statement []struct {
		Effect string
		Action any
	}
}

func checkPlan(t *testing.T, plan *tfjson.Plan) {
	t.Helper()

	// IAM: no Allow statement grants "*" or "service:*" (a Deny with s3:* only forbids).
	var policies int
	for typ, attr := range map[string]string{
		"aws_iam_role_policy":  "policy",
		"aws_iam_role":         "assume_role_policy",
		"aws_s3_bucket_policy": "policy",
	} {
		for _, r := range resources(plan, typ) {
			var doc policyDoc
			if err := json.Unmarshal([]byte(str(t, r, attr)), &doc); err != nil {
				t.Fatalf("%s.%s: %v", r.Address, attr, err)
			}
			policies++
			for _, st := range doc.Statement {
				var actions []string
				switch a := st.Action.(type) {
				case string:
					actions = []string{a}
				case []any:
					for _, x := range a {
						actions = append(actions, x.(string))
					}
				}
				for _, a := range actions {
					if st.Effect != "Deny" && (a == "*" || strings.HasSuffix(a, ":*")) {
						t.Errorf("%s allows wildcard action %q", r.Address, a)
					}
				}
			}
		}
	}
	if policies < 10 {
		t.Errorf("found only %d IAM policies in the plan; the walk is broken", policies)
	}

	dbs := resources(plan, "aws_db_instance")
	if len(dbs) != 1 {
		t.Fatalf("want 1 aws_db_instance, got %d", len(dbs))
	}
	if dbs[0].AttributeValues["publicly_accessible"] != false || dbs[0].AttributeValues["storage_encrypted"] != true {
		t.Errorf("RDS must be private and encrypted: publicly_accessible=%v storage_encrypted=%v",
			dbs[0].AttributeValues["publicly_accessible"], dbs[0].AttributeValues["storage_encrypted"])
	}
	if n, _ := dbs[0].AttributeValues["backup_retention_period"].(float64); n < 1 {
		t.Errorf("RDS backups are off")
	}

	pabs := resources(plan, "aws_s3_bucket_public_access_block")
	if len(pabs) != 1 {
		t.Fatalf("want 1 public access block, got %d", len(pabs))
	}
	for _, k := range []string{"block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"} {
		if pabs[0].AttributeValues[k] != true {
			t.Errorf("bucket public access block %s = %v", k, pabs[0].AttributeValues[k])
		}
	}

	// Dashboard and alarms use exactly the names internal/metrics writes.
	dash := resources(plan, "aws_cloudwatch_dashboard")
	if len(dash) != 1 {
		t.Fatalf("want 1 dashboard, got %d", len(dash))
	}
	body := str(t, dash[0], "dashboard_body")
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{crawlq,(?:Queue|Spider)\} MetricName=\\?"(\w+)\\?"`).FindAllStringSubmatch(body, -1) {
		used[m[1]] = true
	}
	var bodyJSON struct {
		Widgets []struct{ Properties struct{ Metrics [][]any } }
	}
	if err := json.Unmarshal([]byte(body), &bodyJSON); err != nil {
		t.Fatalf("dashboard body: %v", err)
	}
	for _, w := range bodyJSON.Widgets {
		for _, m := range w.Properties.Metrics {
			if ns, ok := m[0].(string); ok && ns == "crawlq" {
				used[m[1].(string)] = true
			}
		}
	}
	want := append(metrics.QueueMetricNames(), metrics.SpiderMetricNames()...)
	got := slices.Sorted(maps.Keys(used))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("dashboard metric names %v, want exactly internal/metrics names %v", got, want)
	}
	for _, a := range resources(plan, "aws_cloudwatch_metric_alarm") {
		for _, m := range regexp.MustCompile(`\((\w+)\) FROM SCHEMA`).FindAllStringSubmatch(mustJSON(t, a.AttributeValues["metric_query"]), -1) {
			if !slices.Contains(want, m[1]) {
				t.Errorf("alarm %s uses unknown metric %q", a.Address, m[1])
			}
		}
	}
}
