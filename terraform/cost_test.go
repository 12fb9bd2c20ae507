package terraform_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"crawlq/internal/cost"
)

// checkCostMatchesPlan holds `crawlq cost --var ...` to what terraform plans with those
// variables: every quantity the bill prices (NAT gateways, the instance class, Multi-AZ and
// storage, RDS Proxy, the runner task's size and crawl concurrency, Container Insights, alarms,
// dashboards, KMS keys, secrets) is counted in the plan, so the model cannot price another
// stack than the one deployed.
func checkCostMatchesPlan(t *testing.T, plan *tfjson.Plan, vars map[string]string) {
	t.Helper()
	priced := map[string]string{}
	for k, v := range vars {
		if _, ok := cost.TerraformDefaults[k]; ok {
			priced[k] = v
		}
	}
	s, err := cost.StackFor(priced)
	if err != nil {
		t.Fatalf("cost.StackFor(%v): %v", priced, err)
	}
	count := func(typ string) int { return len(resources(plan, typ)) }
	want := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("vars %v: terraform plans %s = %v, crawlq cost prices %v", priced, what, got, want)
		}
	}
	want("NAT gateways", count("aws_nat_gateway"), s.NATGateways)
	want("NAT instances", count("aws_instance"), map[bool]int{true: 1, false: 0}[s.NATInstance])
	for _, i := range resources(plan, "aws_instance") {
		want("NAT instance type", i.AttributeValues["instance_type"], "t4g.nano")
		want("NAT instance volume", mustJSON(t, i.AttributeValues["root_block_device"]) != "" &&
			i.AttributeValues["root_block_device"].([]any)[0].(map[string]any)["volume_size"] == float64(cost.NATVolumeGB), true)
	}
	want("private subnets (zones)", count("aws_subnet")/2, s.Zones)
	want("RDS Proxies", count("aws_db_proxy"), map[bool]int{true: 1, false: 0}[s.Proxy])
	db := resources(plan, "aws_db_instance")
	if len(db) != 1 {
		t.Fatalf("%d database instances planned", len(db))
	}
	want("db instance class", db[0].AttributeValues["instance_class"], s.DBClass)
	want("db Multi-AZ", db[0].AttributeValues["multi_az"], s.MultiAZ)
	want("db allocated storage", db[0].AttributeValues["allocated_storage"], s.DBStorageGB)
	insights := "disabled"
	if s.InsightsMetrics > 0 {
		insights = "enabled"
	}
	for _, c := range resources(plan, "aws_ecs_cluster") {
		for _, st := range c.AttributeValues["setting"].([]any) {
			if m := st.(map[string]any); m["name"] == "containerInsights" {
				want("Container Insights", m["value"], insights)
			}
		}
	}
	for _, td := range resources(plan, "aws_ecs_task_definition") {
		cpu, _ := strconv.ParseFloat(td.AttributeValues["cpu"].(string), 64)
		mem, _ := strconv.ParseFloat(td.AttributeValues["memory"].(string), 64)
		want("runner vCPU", cpu/1024, s.TaskVCPU)
		want("runner memory GB", mem/1024, s.TaskMemoryGB)
		cd, ok := td.AttributeValues["container_definitions"].(string)
		if !ok {
			// Unknown until applied when the plan creates what the environment names (RDS
			// Proxy's endpoint): the applied stack's plan checks the wiring.
			continue
		}
		var defs []struct {
			Environment []struct{ Name, Value string }
		}
		if err := json.Unmarshal([]byte(cd), &defs); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, e := range defs[0].Environment {
			switch e.Name {
			case "CRAWLQ_ECS_CRAWL_CONCURRENCY":
				c, _ := strconv.ParseFloat(e.Value, 64)
				want("runner crawl rate (pages/s)", c*cost.PagesPerSecondPerJob, s.PagesPerSecondPerTask)
				seen++
			case "CRAWLQ_METRICS_PER_SPIDER": // the metrics CustomMetrics counts
				want("CRAWLQ_METRICS_PER_SPIDER", e.Value, strconv.FormatBool(s.PerSpiderMetrics))
				seen++
			case "CRAWLQ_ITEMS_BUCKET": // the runner's items go to S3
				seen++
			}
		}
		want("runner variables the bill depends on", seen, map[bool]int{true: 3, false: 2}[s.ItemsToS3ForECS])
	}
	want("CloudWatch alarms", count("aws_cloudwatch_metric_alarm"), s.StandardAlarms+s.InsightsAlarms)
	want("dashboards", count("aws_cloudwatch_dashboard"), s.Dashboards)
	want("KMS keys", count("aws_kms_key"), s.KMSKeys)
	// The RDS-managed master secret is RDS's, not a resource of the plan.
	want("secrets", count("aws_secretsmanager_secret")+1, s.Secrets)
}
