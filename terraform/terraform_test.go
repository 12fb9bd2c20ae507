// Package terraform_test checks the Terraform stack: formatting and validity, a full
// apply / re-plan / destroy against moto, and security and metric-name rules on the plan JSON.
package terraform_test

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

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

// dummyZips writes the five function zips (a bootstrap file each): moto stores code, never runs it.
func dummyZips(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, fn := range []string{"api", "worker", "dispatch", "metrics", "migrate"} {
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

// TestStackOnEmulator deploys the root module to moto with the default variables through
// `crawlq deploy`, re-plans (nothing may change), checks the plan JSON of the real-AWS
// configuration, runs the contract tests of the runner container and the functions against
// what that plan renders, and destroys through `crawlq destroy --yes` (which first refuses,
// since the database has deletion protection by default) after the deploy the refusal names.
// The plans that never apply and the contracts run beside that deploy and destroy, whose RDS
// polls make most of the test's time.
// TestStackDeployDestroyCycles destroys without protection and deploys again; stack says how moto
// is worked around.
func TestStackOnEmulator(t *testing.T) {
	s := newStack(t)
	ctx := s.ctx
	cdb := newContractDB(t)

	// Deploy through the CLI, as a user would: `crawlq deploy` (prebuilt zips, no image push
	// against the emulator), and the outputs it printed (read from the state after the apply).
	outputs := s.deploy()
	if !strings.Contains(s.out.String(), "WARNING: alarm_email is empty") {
		t.Errorf("deploy without alarm_email did not warn; output:\n%s", s.out.String())
	}
	if outputs["ecs_cluster"] != "crawlq" || !strings.Contains(outputs["function_names"], `"worker":"crawlq-worker"`) ||
		!strings.Contains(outputs["function_names"], `"migrate":"crawlq-migrate"`) ||
		outputs["items_bucket"] == "" || outputs["database_endpoint"] == "" || outputs["ecr_repository_url"] == "" ||
		!strings.Contains(outputs["dashboard_url"], "dashboards:name=crawlq") {
		s.fail("unexpected outputs: %v", outputs)
	}
	s.fill(outputs)
	// The secrets and the function URL's policy as applied are read beside the second plan: both
	// only read the account (and the state file, which a plan does not write).
	var applied sync.WaitGroup
	applied.Go(func() {
		t.Run("AppliedSecretsAndURLPolicy", func(t *testing.T) {
			checkNoSecretsInState(t, ctx, s.base.StatePath())
			checkFunctionURLPolicy(t, ctx, "crawlq-api")
		})
	})
	defer applied.Wait() // also when a check below stops the test

	plan, changes, err := s.base.PlanJSON(ctx)
	if err != nil {
		s.fail("second plan: %v", err)
	}
	if changes {
		var diff []string
		for _, rc := range plan.ResourceChanges {
			if !rc.Change.Actions.NoOp() && !rc.Change.Actions.Read() {
				diff = append(diff, rc.Address+" "+strings.Join(actionStrings(rc.Change.Actions), ","))
			}
		}
		s.fail("second plan is not empty: %v", diff)
	}
	checkPlan(t, plan)

	// The plans that never apply (the configuration real AWS gets, other variables, the refused
	// connection budget) and the contracts, which need nothing of the stack but the first of those
	// plans, run beside the refusals, the printed deploy and the destroy below, which wait on
	// terraform and on the provider's RDS polls (about 80 s each for the modify and the delete).
	// The plans read a copy of the applied state in a work directory of their own, so the
	// deploy and destroy changing the stack's own state change nothing they see.
	// The handlers' contract first: its migrate step gives crawlq_app its login (roles are
	// cluster-wide, created NOLOGIN), which the runner container then connects with.
	honest := s.base
	honest.WorkDir = t.TempDir()
	honest.Vars = maps.Clone(s.base.Vars)
	honest.Vars["emulator_workarounds"] = "false"
	honest.NoRefresh = true
	if err := copyFile(s.base.StatePath(), honest.StatePath()); err != nil {
		s.fail("copy the applied state: %v", err)
	}
	var beside sync.WaitGroup
	beside.Go(func() {
		var plan *tfjson.Plan
		if !t.Run("RealAWSPlan", func(t *testing.T) { plan = checkRealAWSPlans(t, s.ctx, honest, s.log) }) {
			return
		}
		var contracts sync.WaitGroup
		contracts.Go(func() {
			t.Run("LambdaHandlers", func(t *testing.T) { checkLambdaContracts(t, plan, cdb) })
			t.Run("RunnerContainer", func(t *testing.T) { checkRunnerContract(t, plan, cdb) })
		})
		t.Run("OtherVariablesPlan", func(t *testing.T) { checkOtherPlans(t, s.ctx, honest, s.log) })
		contracts.Wait()
	})
	defer beside.Wait() // also when a check below stops the test

	// Destroy with the defaults: refused up front (deletion protection), nothing deleted, and
	// the message names the exact command that turns protection off.
	destroyArgs := append([]string{"destroy"}, s.flags...)
	if code := s.cli(destroyArgs...); code != 2 {
		s.fail("crawlq destroy without --yes exited %d, want 2 (refused)", code)
	}
	if code := s.cli(append(destroyArgs, "--yes")...); code != 2 {
		s.fail("crawlq destroy --yes with deletion protection on exited %d, want 2 (refused)", code)
	}
	want := "crawlq deploy " + strings.Join(s.flags, " ") + " --var db_deletion_protection=false"
	if !strings.Contains(s.out.String(), want) || !strings.Contains(s.out.String(), "nothing was deleted") {
		s.fail("destroy refusal does not name the command %q:\n%s", want, s.out.String())
	}
	if after := s.outputs(); after["database_endpoint"] != outputs["database_endpoint"] || after["items_bucket"] != outputs["items_bucket"] {
		s.fail("the refused destroy changed the state: %v", after)
	}
	// The two-step: the printed deploy, then destroy; it finishes, prints no state, and says
	// what it keeps.
	printed := s.deploy("--var", "db_deletion_protection=false")
	s.destroy("after the printed deploy", printed["final_snapshot"])
}

// checkRealAWSPlans plans the configuration real AWS gets (no emulator workarounds) over the
// applied state without refreshing, so that every value is known, checks it and returns it.
func checkRealAWSPlans(t *testing.T, ctx context.Context, honest deploy.Config, log string) *tfjson.Plan {
	plan, _, err := honest.PlanJSON(ctx)
	if err != nil {
		failWithLog(t, log, "plan without emulator workarounds: %v", err)
	}
	checkPlan(t, plan)
	checkCostMatchesPlan(t, plan, honest.Vars)
	pg := resources(plan, "aws_db_parameter_group")
	if len(pg) != 1 || !strings.Contains(mustJSON(t, pg[0].AttributeValues["parameter"]), "rds.force_ssl") {
		t.Errorf("the real parameter group must force SSL: %v", pg)
	}
	return plan
}

// checkOtherPlans plans the stack with other variables (the defaults of before: a NAT gateway,
// RDS Proxy, the runners' items in Postgres, db.t4g.medium, Container Insights, 20 pages a task,
// metrics per spider), only, as `crawlq cost --var ...` prices it, and checks that a
// connection budget the instance cannot hold is refused.
func checkOtherPlans(t *testing.T, ctx context.Context, honest deploy.Config, log string) {
	alt := honest
	alt.Vars = maps.Clone(honest.Vars)
	maps.Copy(alt.Vars, map[string]string{"nat": "gateway", "db_proxy": "on", "runner_items_to_s3": "false", "db_instance_class": "db.t4g.medium",
		"container_insights": "true", "crawl_concurrency": "20", "metrics_per_spider": "true"})
	altPlan, _, err := alt.PlanJSON(ctx)
	if err != nil {
		failWithLog(t, log, "plan with other variables: %v", err)
	}
	checkCostMatchesPlan(t, altPlan, alt.Vars)
	checkConnectionBudgetRefused(t, ctx, honest)
}

// copyFile copies the file at from to a new file at to.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
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

// itemsBucket returns the items bucket of a plan (module.storage.aws_s3_bucket.items; the
// code bucket is the other).
func itemsBucket(t *testing.T, plan *tfjson.Plan) *tfjson.StateResource {
	t.Helper()
	for _, b := range resources(plan, "aws_s3_bucket") {
		if strings.HasSuffix(b.Address, ".items") {
			return b
		}
	}
	t.Fatal("no items bucket (module.storage.aws_s3_bucket.items) in the plan")
	return nil
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

// functionEnvs returns each Lambda function's environment variables in the plan, by function
// name.
func functionEnvs(t *testing.T, plan *tfjson.Plan) map[string]map[string]string {
	t.Helper()
	envs := map[string]map[string]string{}
	for _, f := range resources(plan, "aws_lambda_function") {
		var e []struct{ Variables map[string]string }
		if err := json.Unmarshal([]byte(mustJSON(t, f.AttributeValues["environment"])), &e); err != nil || len(e) != 1 {
			t.Fatalf("%s environment: %v", f.Address, err)
		}
		envs[str(t, f, "function_name")] = e[0].Variables
	}
	return envs
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

	// No reserved concurrency by default: a new account's quota rejects any reservation.
	for _, f := range resources(plan, "aws_lambda_function") {
		if n, _ := f.AttributeValues["reserved_concurrent_executions"].(float64); n != -1 {
			t.Errorf("%s reserves %v units of concurrency by default", f.Address, f.AttributeValues["reserved_concurrent_executions"])
		}
	}

	checkFindings(t, plan)
	checkDatabaseAccess(t, plan)
	checkRunLogs(t, plan)
	checkRunEvents(t, plan)

	checkFunctionCode(t, plan)

	// Every bucket (items, code) blocks public access and is encrypted.
	buckets := resources(plan, "aws_s3_bucket")
	for typ, check := range map[string]func(r *tfjson.StateResource) string{
		"aws_s3_bucket_public_access_block": func(r *tfjson.StateResource) string {
			for _, k := range []string{"block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"} {
				if r.AttributeValues[k] != true {
					return fmt.Sprintf("%s = %v", k, r.AttributeValues[k])
				}
			}
			return ""
		},
		"aws_s3_bucket_server_side_encryption_configuration": func(r *tfjson.StateResource) string {
			if rule := mustJSON(t, r.AttributeValues["rule"]); !strings.Contains(rule, `"sse_algorithm":"AES256"`) {
				return "rule " + rule
			}
			return ""
		},
	} {
		covered := map[string]bool{}
		for _, r := range resources(plan, typ) {
			covered[str(t, r, "bucket")] = true
			if problem := check(r); problem != "" {
				t.Errorf("%s: %s", r.Address, problem)
			}
		}
		for _, b := range buckets {
			if !covered[str(t, b, "id")] {
				t.Errorf("bucket %s has no %s", b.Address, typ)
			}
		}
	}

	// Dashboard and alarms use exactly the names internal/metrics writes.
	dash := resources(plan, "aws_cloudwatch_dashboard")
	if len(dash) != 1 {
		t.Fatalf("want 1 dashboard, got %d", len(dash))
	}
	body := str(t, dash[0], "dashboard_body")
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{crawlq(?:,Queue|,Spider)?\} MetricName=\\?"(\w+)\\?"`).FindAllStringSubmatch(body, -1) {
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

// checkRunLogs: every function names the one run log group that the plan creates, so writers
// (runner task, dispatch) and readers (api) agree, and those roles may write and read it.
func checkRunLogs(t *testing.T, plan *tfjson.Plan) {
	t.Helper()
	var group string
	for _, g := range resources(plan, "aws_cloudwatch_log_group") {
		if strings.HasSuffix(g.Address, ".runs") {
			group = str(t, g, "name")
		}
	}
	if group == "" {
		t.Fatal("no run log group (aws_cloudwatch_log_group.runs) in the plan")
	}
	fns := resources(plan, "aws_lambda_function")
	for _, f := range fns {
		env, _ := f.AttributeValues["environment"].([]any)
		var vars map[string]any
		if len(env) == 1 {
			vars, _ = env[0].(map[string]any)["variables"].(map[string]any)
		}
		if vars["CRAWLQ_RUN_LOG_GROUP"] != group {
			t.Errorf("%s: CRAWLQ_RUN_LOG_GROUP = %v, want %q", f.Address, vars["CRAWLQ_RUN_LOG_GROUP"], group)
		}
	}
	roles := map[string]string{}
	for _, p := range resources(plan, "aws_iam_role_policy") {
		if strings.Contains(p.Address, "run_log_") {
			roles[str(t, p, "role")] += str(t, p, "policy")
		}
	}
	for role, actions := range map[string][]string{
		"crawlq-runner-task": {"logs:PutLogEvents"}, "crawlq-dispatch": {"logs:PutLogEvents"},
		"crawlq-worker": {"logs:PutLogEvents"}, "crawlq-api": {"logs:PutLogEvents", "logs:GetLogEvents"},
	} {
		for _, action := range actions {
			if !strings.Contains(roles[role], action) {
				t.Errorf("role %s may not %s on the run log group (run-log policies: %v)", role, action, roles)
			}
		}
	}
}

// checkRunEvents: every process that publishes the events of its own run changes (api, worker,
// runner task) and the dispatch tick may put events on the bus their environment names.
func checkRunEvents(t *testing.T, plan *tfjson.Plan) {
	t.Helper()
	roles := map[string]string{}
	for _, p := range resources(plan, "aws_iam_role_policy") {
		if strings.Contains(p.Address, "put_run_events") {
			roles[str(t, p, "role")] += str(t, p, "policy")
		}
	}
	for _, role := range []string{"crawlq-api", "crawlq-worker", "crawlq-dispatch", "crawlq-runner-task"} {
		if !strings.Contains(roles[role], "events:PutEvents") || !strings.Contains(roles[role], ":event-bus/default") {
			t.Errorf("role %s may not put run events on the default bus (policies: %v)", role, roles)
		}
	}
	for _, f := range resources(plan, "aws_lambda_function") {
		env, _ := f.AttributeValues["environment"].([]any)
		var vars map[string]any
		if len(env) == 1 {
			vars, _ = env[0].(map[string]any)["variables"].(map[string]any)
		}
		if vars["CRAWLQ_EVENT_BUS"] != "default" {
			t.Errorf("%s: CRAWLQ_EVENT_BUS = %v, want default", f.Address, vars["CRAWLQ_EVENT_BUS"])
		}
	}
	for _, td := range resources(plan, "aws_ecs_task_definition") {
		if defs := str(t, td, "container_definitions"); !strings.Contains(defs, `"CRAWLQ_EVENT_BUS"`) {
			t.Errorf("%s: the runner's environment lacks CRAWLQ_EVENT_BUS (its CLI would publish nowhere)", td.Address)
		}
	}
}

type stmt struct {
	Sid       string
	Effect    string
	Action    any
	Resource  any
	Principal map[string]any
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func statements(t *testing.T, doc string) []stmt {
	t.Helper()
	var d struct{ Statement []stmt }
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatalf("policy %s: %v", doc, err)
	}
	return d.Statement
}

// checkFindings checks the plan against each finding of issue 16: the alarm key lets
// CloudWatch publish, nothing but the proxy reads the master secret and only migrate connects as
// the master user, nothing reaches the instance but the proxy, the runners sit in public subnets
// with public IPs and no inbound rule, S3 has a gateway endpoint, item versions expire, the
// dashboard's task count is a metric standalone tasks report, and only the worker may touch items.
func checkFindings(t *testing.T, plan *tfjson.Plan) {
	t.Helper()
	one := func(typ string) *tfjson.StateResource {
		t.Helper()
		rs := resources(plan, typ)
		if len(rs) != 1 {
			t.Fatalf("want 1 %s, got %d", typ, len(rs))
		}
		return rs[0]
	}

	// Alerts: the topic uses our key; its policy and the key's, evaluated, let every source of
	// alerts (each alarm acting on the topic, each rule targeting it) publish, for this account only.
	key, topic := one("aws_kms_key"), one("aws_sns_topic")
	topicARN := str(t, topic, "arn")
	if topic.AttributeValues["kms_master_key_id"] != key.AttributeValues["arn"] {
		t.Errorf("alarm topic key %v, want the stack's key %v", topic.AttributeValues["kms_master_key_id"], key.AttributeValues["arn"])
	}
	arnParts := strings.SplitN(topicARN, ":", 6)
	region, account := arnParts[3], arnParts[4]
	sources := alertSources{}
	for _, a := range resources(plan, "aws_cloudwatch_metric_alarm") {
		if slices.Contains(strs(a.AttributeValues["alarm_actions"]), topicARN) {
			sources["cloudwatch.amazonaws.com"] = append(sources["cloudwatch.amazonaws.com"], str(t, a, "arn"))
		}
	}
	ruleARNs := map[string]string{}
	for _, r := range resources(plan, "aws_cloudwatch_event_rule") {
		ruleARNs[str(t, r, "name")] = str(t, r, "arn")
	}
	for _, tg := range resources(plan, "aws_cloudwatch_event_target") {
		if tg.AttributeValues["arn"] == topicARN {
			sources["events.amazonaws.com"] = append(sources["events.amazonaws.com"], ruleARNs[str(t, tg, "rule")])
		}
	}
	for _, p := range alertProblems(str(t, one("aws_sns_topic_policy"), "policy"), str(t, key, "policy"), topicARN, str(t, key, "arn"), account, sources) {
		t.Errorf("alerts: %s", p)
	}
	// IAM: no role may act on resources that are not the stack's (GetSecretValue on "*",
	// rds-db:connect on dbuser:*/*, ...).
	for _, p := range resources(plan, "aws_iam_role_policy") {
		for _, problem := range iamProblems(p.Address, str(t, p, "policy"), region, account) {
			t.Error(problem)
		}
	}

	// The api reads items and keeps large answers (internal/scrapyd.S3Spill), and can change
	// no item: evaluated, not matched.
	bucket := str(t, itemsBucket(t, plan), "arn")
	for _, p := range resources(plan, "aws_iam_role_policy") {
		if str(t, p, "name") == "crawlq-api" {
			for _, problem := range apiBucketProblems(str(t, p, "policy"), bucket) {
				t.Errorf("%s: %s", p.Address, problem)
			}
		}
	}

	// The master secret: read by the proxy role only, or without the proxy by migrate only; the
	// master user: connected as by migrate only.
	proxied := len(resources(plan, "aws_db_proxy")) > 0
	dbi := one("aws_db_instance")
	secrets, _ := dbi.AttributeValues["master_user_secret"].([]any)
	if len(secrets) != 1 {
		t.Fatalf("master_user_secret: %v", dbi.AttributeValues["master_user_secret"])
	}
	master := secrets[0].(map[string]any)["secret_arn"].(string)
	masterUser := str(t, dbi, "username")
	for _, p := range resources(plan, "aws_iam_role_policy") {
		role := str(t, p, "name")
		for _, st := range statements(t, str(t, p, "policy")) {
			for _, r := range strs(st.Resource) {
				if r == master && (proxied && str(t, p, "role") != "crawlq-db-proxy" || !proxied && role != "crawlq-migrate") {
					t.Errorf("%s (%s) can read the master secret", p.Address, role)
				}
				if strings.Contains(r, ":dbuser:") && strings.HasSuffix(r, "/"+masterUser) && role != "crawlq-migrate" {
					t.Errorf("%s (%s) may connect as the master user", p.Address, role)
				}
				if strings.Contains(r, ":s3:::") && role != "crawlq-worker" && role != "crawlq-api" && role != "crawlq-runner-task" {
					t.Errorf("%s (%s) gets bucket access it never uses", p.Address, role)
				}
				// The api reads the Scrapyd API's credentials (scrapyd_api), and no other secret.
				scrapydCreds := role == "scrapyd-api" && strings.Contains(r, ":secret:crawlq-scrapyd-credentials")
				if strings.Contains(r, ":secretsmanager:") && role != "crawlq-migrate" && role != "read-db-secret" && !scrapydCreds {
					t.Errorf("%s (%s) reads a secret", p.Address, role)
				}
			}
		}
	}
	for _, f := range resources(plan, "aws_lambda_function") {
		if strings.Contains(mustJSON(t, f.AttributeValues["environment"]), master) && (proxied || str(t, f, "function_name") != "crawlq-migrate") {
			t.Errorf("%s is told the master secret's ARN", f.Address)
		}
	}

	// Security groups by name, and the rules that reference them.
	sgByID := map[string]string{}
	for _, sg := range resources(plan, "aws_security_group") {
		sgByID[str(t, sg, "id")] = str(t, sg, "name")
		if in, _ := sg.AttributeValues["ingress"].([]any); len(in) > 0 && str(t, sg, "name") == "crawlq-runner" {
			t.Errorf("runner security group has inline ingress %v", in)
		}
	}
	for _, r := range resources(plan, "aws_vpc_security_group_ingress_rule") {
		to := sgByID[str(t, r, "security_group_id")]
		from := sgByID[fmt.Sprint(r.AttributeValues["referenced_security_group_id"])]
		switch to {
		case "crawlq-db":
			if proxied && from != "crawlq-db-proxy" {
				t.Errorf("%s lets %q reach the database instance directly; only the proxy may", r.Address, from)
			}
			if !proxied && from != "crawlq-app" && from != "crawlq-runner" {
				t.Errorf("%s lets %q reach the database instance; only the functions and runners may", r.Address, from)
			}
		case "crawlq-runner":
			t.Errorf("%s is an inbound rule on the runner tasks, which sit in public subnets", r.Address)
		}
	}

	// Runners: public subnets (routed to the internet gateway), public IPs, the runner group.
	publicRT := ""
	for _, r := range resources(plan, "aws_route") {
		if r.AttributeValues["gateway_id"] != nil && r.AttributeValues["gateway_id"] != "" {
			publicRT = str(t, r, "route_table_id")
		}
	}
	public := map[string]bool{}
	for _, a := range resources(plan, "aws_route_table_association") {
		if a.AttributeValues["route_table_id"] == publicRT {
			public[str(t, a, "subnet_id")] = true
		}
	}
	env := functionEnvs(t, plan)["crawlq-dispatch"]
	subnets := strings.Split(env["CRAWLQ_ECS_SUBNETS"], ",")
	if len(public) == 0 || len(subnets) == 0 || env["CRAWLQ_ECS_ASSIGN_PUBLIC_IP"] != "true" || sgByID[env["CRAWLQ_ECS_SECURITY_GROUPS"]] != "crawlq-runner" {
		t.Errorf("runner tasks: subnets %v (public: %v), public IP %q, security group %q; want public subnets, a public IP and crawlq-runner",
			subnets, public, env["CRAWLQ_ECS_ASSIGN_PUBLIC_IP"], sgByID[env["CRAWLQ_ECS_SECURITY_GROUPS"]])
	}
	for _, s := range subnets {
		if !public[s] {
			t.Errorf("runner subnet %s is not routed to the internet gateway", s)
		}
	}

	// S3 gateway endpoint on every route table.
	ep := one("aws_vpc_endpoint")
	if !strings.HasSuffix(str(t, ep, "service_name"), ".s3") || ep.AttributeValues["vpc_endpoint_type"] != "Gateway" {
		t.Errorf("S3 endpoint: %s %v", str(t, ep, "service_name"), ep.AttributeValues["vpc_endpoint_type"])
	}
	rts := strs(ep.AttributeValues["route_table_ids"])
	if n := len(resources(plan, "aws_route_table")); len(rts) != n {
		t.Errorf("S3 endpoint on %d route tables, want all %d", len(rts), n)
	}

	// Items: old versions expire.
	lc := mustJSON(t, one("aws_s3_bucket_lifecycle_configuration").AttributeValues["rule"])
	if !strings.Contains(lc, `"noncurrent_days":30`) {
		t.Errorf("items bucket keeps noncurrent versions: %s", lc)
	}

	// Dashboard: with Container Insights, the cluster-level task count, which standalone RunTask
	// tasks report; without, no graph of a metric that would never exist.
	body := str(t, one("aws_cloudwatch_dashboard"), "dashboard_body")
	insights := strings.Contains(mustJSON(t, one("aws_ecs_cluster").AttributeValues["setting"]), `"value":"enabled"`)
	if strings.Contains(body, `["ECS/ContainerInsights","TaskCount","ClusterName","crawlq"]`) != insights || strings.Contains(body, "RunningTaskCount") {
		t.Errorf("dashboard running-tasks widget: want ECS/ContainerInsights TaskCount by ClusterName exactly when Container Insights is on (%v)", insights)
	}

	// The runner container runs the image's entrypoint alone (the contract test runs it).
	var defs []containerDef
	_ = json.Unmarshal([]byte(str(t, one("aws_ecs_task_definition"), "container_definitions")), &defs)
	if len(defs) != 1 || len(defs[0].Command) != 0 || len(defs[0].EntryPoint) != 0 {
		t.Errorf("runner container overrides the image's entrypoint or command: %+v", defs)
	}
}
