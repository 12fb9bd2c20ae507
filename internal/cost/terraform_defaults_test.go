package cost_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"crawlq/internal/cost"
)

// tfDefaults reads the scalar defaults of the root module's variables (terraform/*.tf): each
// `variable "x" {` block's first `default = v` line.
func tfDefaults(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../terraform/*.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("terraform/*.tf: %v", err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(out, fileDefaults(b))
	}
	return out
}

func fileDefaults(b []byte) map[string]string {
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

// StackFor starts from TerraformDefaults: hold each to terraform/variables.tf, so a changed
// default there fails here until the bill is re-priced, and a variable the model prices cannot
// be missing from the module.
func TestTerraformDefaultsAreVariablesTf(t *testing.T) {
	t.Parallel()
	tf := tfDefaults(t)
	for k, want := range cost.TerraformDefaults {
		got, ok := tf[k]
		if !ok {
			t.Errorf("cost prices terraform variable %s, which variables.tf does not declare with a default", k)
			continue
		}
		if got != want {
			t.Errorf("terraform default %s = %q, cost.TerraformDefaults has %q", k, got, want)
		}
	}
}

// What StackFor makes of the variables the user passes, and what it refuses by name.
func TestStackFor(t *testing.T) {
	t.Parallel()
	d := cost.DefaultStack()
	if d.DBClass != "db.t4g.small" || d.DBHour != cost.RDSt4gSmallHour || d.PagesPerSecondPerTask != 50 || d.InsightsMetrics != 0 ||
		d.NATGateways != 0 || !d.NATInstance || d.Proxy || !d.ItemsToS3ForECS || d.Secrets != 1 || d.TaskVCPU != 1 || d.TaskMemoryGB != 2 || d.LogRetentionDays != 30 {
		t.Errorf("default stack %+v", d)
	}
	s, err := cost.StackFor(map[string]string{"db_instance_class": "db.t4g.medium", "single_nat_gateway": "false", "az_count": "3",
		"container_insights": "true", "crawl_concurrency": "20", "db_multi_az": "true", "nat": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	if s.DBHour != cost.RDSt4gMediumHour || s.NATGateways != 3 || s.NATInstance || s.Zones != 3 || s.InsightsMetrics != 22 || s.PagesPerSecondPerTask != 20 || !s.MultiAZ {
		t.Errorf("stack with variables %+v", s)
	}
	// nat = "auto" is the NAT instance, and db_proxy = "auto" no proxy, only when no Lambda crawls.
	if s, err := cost.StackFor(map[string]string{"nat": "auto", "crawl_runtime": "lambda"}); err != nil || s.NATInstance || s.NATGateways != 1 || !s.Proxy || s.Secrets != 2 {
		t.Errorf("nat=auto crawl_runtime=lambda: NAT instance %v, %d gateways, proxy %v, %d secrets (%v); want the gateway, the proxy and the app role's secret",
			s.NATInstance, s.NATGateways, s.Proxy, s.Secrets, err)
	}
	if s, err := cost.StackFor(map[string]string{"db_proxy": "on", "runner_items_to_s3": "false"}); err != nil || !s.Proxy || s.Secrets != 2 || s.ItemsToS3ForECS {
		t.Errorf("db_proxy=on runner_items_to_s3=false: proxy %v, %d secrets, items to S3 %v (%v)", s.Proxy, s.Secrets, s.ItemsToS3ForECS, err)
	}
	var ve *cost.VarError
	if _, err := cost.StackFor(map[string]string{"nat": "instance", "nat_instance_type": "c7g.large"}); !errors.As(err, &ve) || ve.Var != "nat_instance_type" {
		t.Errorf("nat_instance_type=c7g.large: %v, want a VarError naming it", err)
	}
	if s, err := cost.StackFor(map[string]string{"nat": "auto"}); err != nil || !s.NATInstance || s.NATGateways != 0 || s.StandardAlarms != 11 {
		t.Errorf("nat=auto: NAT instance %v, %d gateways, %d alarms (%v); want the instance and its alarm", s.NATInstance, s.NATGateways, s.StandardAlarms, err)
	}
	for v, val := range map[string]string{
		"nat":                "sometimes",
		"db_proxy":           "off",
		"runner_items_to_s3": "maybe",
		"db_instance_class":  "db.r7g.large",
		"crawl_concurrency":  "many",
		"container_insights": "yes",
		"crawl_lambda_burst": "5",
		"region":             "eu-west-1",
		"no_such_variable":   "1",
	} {
		_, err := cost.StackFor(map[string]string{v: val})
		var ve *cost.VarError
		if !errors.Is(err, cost.ErrInvalid) || !errors.As(err, &ve) || ve.Var != v {
			t.Errorf("%s=%s: %v, want a VarError naming it", v, val, err)
		}
	}
}
