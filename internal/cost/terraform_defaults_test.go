package cost_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"crawlq/internal/cost"
)

// tfDefaults reads the scalar defaults of terraform/variables.tf: each `variable "x" {` block's
// first `default = v` line.
func tfDefaults(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../terraform/variables.tf")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	blocks := regexp.MustCompile(`(?m)^variable "([a-z0-9_]+)" \{`).FindAllSubmatchIndex(b, -1)
	def := regexp.MustCompile(`(?m)^  default\s*=\s*"?([^"\n]*)"?\s*$`)
	for i, m := range blocks {
		end := len(b)
		if i+1 < len(blocks) {
			end = blocks[i+1][0]
		}
		if d := def.FindSubmatch(b[m[1]:end]); d != nil {
			out[string(b[m[2]:m[3]])] = string(d[1])
		}
	}
	return out
}

// DefaultStack says it is what terraform/ deploys with its default variables: hold it to them,
// so a change of default there shows here as a bill to re-price.
func TestDefaultStackIsTerraformsDefaults(t *testing.T) {
	t.Parallel()
	tf := tfDefaults(t)
	s := cost.DefaultStack()
	num := func(v string) float64 {
		f, err := strconv.ParseFloat(tf[v], 64)
		if err != nil {
			t.Fatalf("terraform default of %s: %q: %v", v, tf[v], err)
		}
		return f
	}
	for _, c := range []struct {
		variable  string
		got, want float64
	}{
		{"az_count", float64(s.Zones), num("az_count")},
		{"db_allocated_storage", s.DBStorageGB, num("db_allocated_storage")},
		{"runner_cpu", s.TaskVCPU * 1024, num("runner_cpu")},
		{"runner_memory", s.TaskMemoryGB * 1024, num("runner_memory")},
		// The crawl rate assumes about a second per page at crawl_concurrency jobs at once.
		{"crawl_concurrency", s.PagesPerSecondPerTask, num("crawl_concurrency")},
		{"worker_memory", s.WorkerMemoryGB * 1024, num("worker_memory")},
		{"worker_timeout", s.InvocationSeconds, num("worker_timeout")},
		{"log_retention_days", cost.LogRetentionMonths * cost.DaysPerMonth, num("log_retention_days")},
		// The model prices no burst: crawl pages fetched by Lambdas would pay NAT.
		{"crawl_lambda_burst", 0, num("crawl_lambda_burst")},
		{"container_insights (metrics when true)", float64(s.InsightsMetrics), map[string]float64{"true": 22, "false": 0}[tf["container_insights"]]},
	} {
		if c.got != c.want {
			t.Errorf("terraform default %s gives %g, cost.DefaultStack assumes %g", c.variable, c.want, c.got)
		}
	}
	nat := map[string]int{"true": 1, "false": s.Zones}[tf["single_nat_gateway"]]
	for _, c := range []struct{ variable, got, want string }{
		{"db_instance_class", s.DBClass, tf["db_instance_class"]},
		{"single_nat_gateway (NAT gateways)", strconv.Itoa(s.NATGateways), strconv.Itoa(nat)},
		{"db_multi_az", "false", tf["db_multi_az"]},
		{"crawl_runtime", "fargate", tf["crawl_runtime"]},
		{"region", "us-east-1", tf["region"]},
	} {
		if c.got != c.want {
			t.Errorf("terraform default %s is %q, cost.DefaultStack assumes %q", c.variable, c.want, c.got)
		}
	}
}
