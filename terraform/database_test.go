package terraform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"crawlq/internal/awspolicy"
	"crawlq/internal/deploy"
)

// The checks in this file hold the stack without RDS Proxy (db_proxy = "auto" when no Lambda
// crawls) to what docs/cost.md says it gives up and keeps: clients reach the instance with IAM
// tokens for the application role only (rds-db:connect on this instance's resource id and that
// user, evaluated); only the migrate function reads the master secret; TLS verifies the
// instance against the region's RDS roots; the runner tasks' connections fit the instance; and
// the runners may write items and nothing else in the bucket.

// dbGrants are what the stack's identity policies may do with the database and its secret.
type dbGrants struct {
	region, account string
	resourceID      string // the instance's db-... (or the proxy's prx-...)
	appUser         string
	masterUser      string
	masterSecret    string
	bucketARN       string
}

func (g dbGrants) connectARN(resourceID, user string) string {
	return fmt.Sprintf("arn:aws:rds-db:%s:%s:dbuser:%s/%s", g.region, g.account, resourceID, user)
}

// dbGrantProblems evaluates the identity policy doc of role (a function's role policy name,
// crawlq-<fn>, or crawlq-runner-task): the application's roles may connect as the application
// role to this database only, never as the master user; only migrate may read the master
// secret (and connects with it, so it needs no connect grant); the runner task may put items
// and nothing else in the bucket.
func dbGrantProblems(role, doc string, g dbGrants, runnerItems bool) []string {
	pol, err := awspolicy.Parse(doc)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", role, err)}
	}
	var out []string
	allows := func(action, resource string) bool {
		return pol.Allows(awspolicy.Request{Action: action, Resource: resource})
	}
	app := role == "crawlq-api" || role == "crawlq-worker" || role == "crawlq-dispatch" || role == "crawlq-metrics" || role == "crawlq-runner-task"
	if got := allows("rds-db:connect", g.connectARN(g.resourceID, g.appUser)); app && !got {
		out = append(out, fmt.Sprintf("%s may not connect as %s to %s", role, g.appUser, g.resourceID))
	} else if !app && got {
		out = append(out, fmt.Sprintf("%s may connect as %s", role, g.appUser))
	}
	for _, user := range []string{g.masterUser, "postgres", "rdsadmin", "someone_else"} {
		if allows("rds-db:connect", g.connectARN(g.resourceID, user)) {
			out = append(out, fmt.Sprintf("%s may connect as %s", role, user))
		}
	}
	if allows("rds-db:connect", g.connectARN("db-ANOTHERINSTANCE0000000000", g.appUser)) {
		out = append(out, fmt.Sprintf("%s may connect to another instance", role))
	}
	if got := allows("secretsmanager:GetSecretValue", g.masterSecret); got != (role == "crawlq-migrate") {
		out = append(out, fmt.Sprintf("%s: reads the master secret = %v, want %v (migrate only)", role, got, role == "crawlq-migrate"))
	}
	if role == "crawlq-runner-task" {
		if got := allows("s3:PutObject", g.bucketARN+"/items/7/part-1.jsonl.gz"); got != runnerItems {
			out = append(out, fmt.Sprintf("%s: puts items = %v, want %v (runner_items_to_s3)", role, got, runnerItems))
		}
		for _, r := range []awspolicy.Request{
			{Action: "s3:GetObject", Resource: g.bucketARN + "/items/7/part-1.jsonl.gz"},
			{Action: "s3:DeleteObject", Resource: g.bucketARN + "/items/7/part-1.jsonl.gz"},
			{Action: "s3:PutObject", Resource: g.bucketARN + "/scrapyd-answers/x"},
			{Action: "s3:ListBucket", Resource: g.bucketARN},
		} {
			if pol.Allows(r) {
				out = append(out, fmt.Sprintf("%s may %s %s", role, r.Action, r.Resource))
			}
		}
	}
	return out
}

// runnerConnectionProblems checks the runner tasks' connection cap without the proxy: every
// task's pool is capped, and the tasks' connections with the functions' reserve fit in what
// the instance class serves (max_connections = memory / 9531392, 80% of it counted).
func runnerConnectionProblems(runnerEnv map[string]string, classMemoryGiB float64) []string {
	conns, err := strconv.Atoi(runnerEnv["CRAWLQ_DB_MAX_CONNS"])
	if err != nil || conns < 1 {
		return []string{fmt.Sprintf("runner CRAWLQ_DB_MAX_CONNS %q: without RDS Proxy every task's pool must be capped", runnerEnv["CRAWLQ_DB_MAX_CONNS"])}
	}
	crawl, _ := strconv.Atoi(runnerEnv["CRAWLQ_ECS_CRAWL_MAX_TASKS"])
	other, _ := strconv.Atoi(runnerEnv["CRAWLQ_ECS_MAX_TASKS"])
	limit := int(classMemoryGiB * 1073741824 / 9531392 * 0.8)
	if need := (crawl+other)*conns + 40; crawl == 0 || other == 0 || need > limit {
		return []string{fmt.Sprintf("runner tasks (%d crawl + %d other) x %d connections + 40 for the functions = %d, the instance serves %d", crawl, other, conns, need, limit)}
	}
	return nil
}

var classMemoryGiB = map[string]float64{"db.t4g.micro": 1, "db.t4g.small": 2, "db.t4g.medium": 4, "db.t4g.large": 8}

// checkConnectionBudgetRefused plans the applied stack on db.t4g.micro (about 90 connections
// counted) without the proxy: 30 runner tasks x 4 connections + 40 do not fit, and the plan
// must fail naming the variables rather than deploy a stack that refuses connections under load.
func checkConnectionBudgetRefused(t *testing.T, ctx context.Context, base deploy.Config) {
	t.Helper()
	micro := base
	micro.Vars = maps.Clone(base.Vars)
	micro.Vars["db_instance_class"] = "db.t4g.micro"
	var out bytes.Buffer
	micro.Stdout = &out
	if _, _, err := micro.PlanJSON(ctx); err == nil || !strings.Contains(err.Error()+out.String(), "runner_db_connections") {
		t.Errorf("plan on db.t4g.micro without RDS Proxy: %v; want it refused naming runner_db_connections\n%.2000s", err, out.String())
	}
}

// checkDatabaseAccess runs the checks above on a plan of the stack without RDS Proxy.
func checkDatabaseAccess(t *testing.T, plan *tfjson.Plan) {
	t.Helper()
	if len(resources(plan, "aws_db_proxy")) != 0 {
		return // the proxy's stack: checkFindings
	}
	dbi := resources(plan, "aws_db_instance")[0]
	secrets, _ := dbi.AttributeValues["master_user_secret"].([]any)
	if len(secrets) != 1 {
		t.Fatalf("master_user_secret: %v", dbi.AttributeValues["master_user_secret"])
	}
	topic := str(t, resources(plan, "aws_sns_topic")[0], "arn")
	parts := strings.SplitN(topic, ":", 6)
	g := dbGrants{region: parts[3], account: parts[4], resourceID: str(t, dbi, "resource_id"), appUser: "crawlq_app",
		masterUser: str(t, dbi, "username"), masterSecret: secrets[0].(map[string]any)["secret_arn"].(string),
		bucketARN: str(t, itemsBucket(t, plan), "arn")}
	if !strings.HasPrefix(g.resourceID, "db-") {
		t.Errorf("the instance's resource id %q is not a db-... id", g.resourceID)
	}

	envs := functionEnvs(t, plan)
	var defs []containerDef
	if err := json.Unmarshal([]byte(str(t, resources(plan, "aws_ecs_task_definition")[0], "container_definitions")), &defs); err != nil || len(defs) != 1 {
		t.Fatalf("container definitions: %v", err)
	}
	runner := map[string]string{}
	for _, e := range defs[0].Environment {
		runner[e.Name] = e.Value
	}
	envs["crawlq-runner-task"] = runner
	_, runnerItems := runner["CRAWLQ_ITEMS_BUCKET"]

	caURL := fmt.Sprintf("https://truststore.pki.rds.amazonaws.com/%s/%s-bundle.pem", g.region, g.region)
	for name, e := range envs {
		if e["CRAWLQ_DB_HOST"] != str(t, dbi, "address") || e["CRAWLQ_DB_CA_URL"] != caURL {
			t.Errorf("%s: CRAWLQ_DB_HOST %q, CRAWLQ_DB_CA_URL %q; want the instance %q, verified against %s", name, e["CRAWLQ_DB_HOST"], e["CRAWLQ_DB_CA_URL"], str(t, dbi, "address"), caURL)
		}
		if name == "crawlq-migrate" {
			if e["CRAWLQ_DB_IAM_AUTH"] != "false" || e["CRAWLQ_DB_SECRET_ARN"] != g.masterSecret || e["CRAWLQ_DB_APP_IAM"] != "true" || e["CRAWLQ_DB_APP_SECRET_ARN"] != "" || e["CRAWLQ_DB_USER"] != g.masterUser {
				t.Errorf("migrate: %v; want the master user with its secret, and the application role given its IAM login", e)
			}
			continue
		}
		if e["CRAWLQ_DB_IAM_AUTH"] != "true" || e["CRAWLQ_DB_USER"] != g.appUser || e["CRAWLQ_DB_SECRET_ARN"] != "" {
			t.Errorf("%s: IAM auth %q as %q (secret %q); want IAM tokens for %s", name, e["CRAWLQ_DB_IAM_AUTH"], e["CRAWLQ_DB_USER"], e["CRAWLQ_DB_SECRET_ARN"], g.appUser)
		}
	}
	for _, p := range runnerConnectionProblems(runner, classMemoryGiB[str(t, dbi, "instance_class")]) {
		t.Error(p)
	}

	// Every role's policies together, evaluated.
	docs := map[string][]string{}
	for _, p := range resources(plan, "aws_iam_role_policy") {
		role := str(t, p, "role")
		docs[role] = append(docs[role], str(t, p, "policy"))
	}
	for role, ds := range docs {
		if strings.Contains(role, "execution") || strings.Contains(role, "scheduler") {
			continue // ECS's own (image pull, logs) and EventBridge Scheduler's roles
		}
		var statements []json.RawMessage
		for _, d := range ds {
			var doc struct{ Statement []json.RawMessage }
			if err := json.Unmarshal([]byte(d), &doc); err != nil {
				t.Fatal(err)
			}
			statements = append(statements, doc.Statement...)
		}
		merged, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": statements})
		for _, p := range dbGrantProblems(role, string(merged), g, runnerItems) {
			t.Error(p)
		}
		if role == "crawlq-runner-task" {
			for _, p := range runnerArtifactProblems(string(merged), g.bucketARN, runnerItems) { // artifacts_test.go
				t.Error(p)
			}
		}
	}
	if _, ok := docs["crawlq-runner-task"]; !ok {
		t.Errorf("no policy of the runner task's role in the plan (roles %v)", slices.Sorted(maps.Keys(docs)))
	}
}

// TestDatabaseAccessChecks shows the checks above failing on grants a stack without the proxy
// could get wrong (connect on every user or instance, the master secret to another role, the
// bucket to the runner, uncapped runner pools) and passing on narrow ones, without an apply.
func TestDatabaseAccessChecks(t *testing.T) {
	t.Parallel()
	g := dbGrants{region: "us-east-1", account: "123456789012", resourceID: "db-ABCDEFGHIJKLMNOPQRSTUVWXYZ", appUser: "crawlq_app",
		masterUser: "crawlq", masterSecret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!db-1-AbCdEf", bucketARN: "arn:aws:s3:::crawlq-items-123456789012"}
	doc := func(statements ...string) string {
		return `{"Version":"2012-10-17","Statement":[` + strings.Join(statements, ",") + `]}`
	}
	connect := func(resource string) string {
		return `{"Effect":"Allow","Action":"rds-db:connect","Resource":"` + resource + `"}`
	}
	good := connect(g.connectARN(g.resourceID, g.appUser))
	for _, c := range []struct {
		role, doc string
		items     bool
		want      string // "" for no problem
	}{
		{"crawlq-api", doc(good), false, ""},
		{"crawlq-runner-task", doc(good, `{"Effect":"Allow","Action":"s3:PutObject","Resource":"`+g.bucketARN+`/items/*"}`), true, ""},
		{"crawlq-migrate", doc(`{"Effect":"Allow","Action":"secretsmanager:GetSecretValue","Resource":"` + g.masterSecret + `"}`), false, ""},
		{"crawlq-api", doc(connect("arn:aws:rds-db:us-east-1:123456789012:dbuser:" + g.resourceID + "/*")), false, "may connect as crawlq"},
		{"crawlq-api", doc(connect("arn:aws:rds-db:us-east-1:123456789012:dbuser:*/crawlq_app")), false, "another instance"},
		{"crawlq-dispatch", doc(connect("*")), false, "may connect as crawlq"},
		{"crawlq-metrics", doc(), false, "may not connect as crawlq_app"},
		{"crawlq-migrate", doc(good, `{"Effect":"Allow","Action":"secretsmanager:GetSecretValue","Resource":"`+g.masterSecret+`"}`), false, "crawlq-migrate may connect as crawlq_app"},
		{"crawlq-api", doc(good, `{"Effect":"Allow","Action":"secretsmanager:GetSecretValue","Resource":"*"}`), false, "reads the master secret = true"},
		{"crawlq-runner-task", doc(good, `{"Effect":"Allow","Action":["s3:PutObject","s3:GetObject"],"Resource":"`+g.bucketARN+`/*"}`), true, "may s3:GetObject"},
		{"crawlq-runner-task", doc(good), true, "puts items = false"},
		{"crawlq-runner-task", doc(good, `{"Effect":"Allow","Action":"s3:PutObject","Resource":"`+g.bucketARN+`/items/*"}`), false, "puts items = true"},
	} {
		got := dbGrantProblems(c.role, c.doc, g, c.items)
		if c.want == "" && len(got) > 0 || c.want != "" && !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("%s %s: problems %q, want one containing %q", c.role, c.doc, got, c.want)
		}
	}
	env := map[string]string{"CRAWLQ_ECS_CRAWL_MAX_TASKS": "20", "CRAWLQ_ECS_MAX_TASKS": "10", "CRAWLQ_DB_MAX_CONNS": "4"}
	if p := runnerConnectionProblems(env, 2); len(p) > 0 {
		t.Errorf("the defaults on db.t4g.small: %v", p)
	}
	if p := runnerConnectionProblems(env, 1); len(p) == 0 {
		t.Error("30 tasks x 4 + 40 connections on db.t4g.micro (about 90) passed")
	}
	delete(env, "CRAWLQ_DB_MAX_CONNS") // the runner's own 20 a task
	if p := runnerConnectionProblems(env, 2); len(p) == 0 {
		t.Error("uncapped runner pools passed")
	}
}
