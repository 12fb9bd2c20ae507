package cli_test

import (
	"strings"
	"testing"
)

func TestCostCommand(t *testing.T) {
	t.Parallel()
	code, out, errs := run(t, "", "cost", "--pages-per-month", "100000000")
	if code != 0 {
		t.Fatalf("cost: %d %q", code, errs)
	}
	// Every term of the bill, and the totals internal/cost's hand calculation gives for the
	// default inputs (100 KB pages, 2 queues, 10 spiders, 1 KB items kept a month).
	for _, want := range []string{"list prices read 2025-06",
		"Fargate Spot runners", "runner public IPv4", "outbound traffic (requests, ACKs, TLS)", "fetched bytes through NAT",
		"cross-AZ to the database", "logs per page", "items in Postgres", "NAT gateway", "NAT public IPv4", "RDS instance",
		"RDS storage", "RDS Proxy", "CloudWatch metrics (crawlq)", "25 = 7 x 2 queues + 7 spider totals", "Container Insights metrics",
		"CloudWatch dashboard", "CloudWatch alarms", "logs of the minute ticks", "minute ticks (Lambda + Scheduler)", "KMS",
		"Secrets Manager", "ECR images",
		"$0.5296", "$101.91", "all-in per million pages at 100000000 pages/month: $1.549",
		"$1 per million pages all-in: from 217 million pages/month", "RDS storage autoscaling stops at 200 GB", "the lean topology (--topology lean", "$0.965 all-in"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost output lacks %q:\n%s", want, out)
		}
	}
	// The stack as deployed with other variables: the defaults of before (issue 32's bill).
	code, out, errs = run(t, "", "cost", "--var", "db_instance_class=db.t4g.medium", "--var", "container_insights=true", "--var", "crawl_concurrency=20",
		"--var", "metrics_per_spider=true")
	if code != 0 {
		t.Fatalf("cost --var: %d %q", code, errs)
	}
	for _, want := range []string{"terraform/ with [container_insights=true crawl_concurrency=20 db_instance_class=db.t4g.medium metrics_per_spider=true]", "128 = 7 x 2 queues", "NAT gateway",
		"$0.6947", "$163.50", "all-in per million pages at 100000000 pages/month: $2.330"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost --var output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = run(t, "", "cost", "--var", "crawl_runtime=lambda")
	if code != 0 || !strings.Contains(out, "crawling on lambda") || !strings.Contains(out, "worker Lambdas") {
		t.Errorf("cost --var crawl_runtime=lambda: %d %q\n%s", code, errs, out)
	}
	code, out, errs = run(t, "", "cost", "--topology", "both", "--spiders", "100", "--var", "metrics_per_spider=true")
	if code != 0 {
		t.Fatalf("cost --topology both: %d %q", code, errs)
	}
	for _, want := range []string{"topology terraform/ with [metrics_per_spider=true]", "topology lean", "1118 = 7 x 2 queues", "25 = 7 x 2 queues + 7 spider totals", "items in S3"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost --topology both output lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--pages-per-month", "0"}, "--pages-per-month"},
		{[]string{"--page-kb", "-1"}, "--page-kb"},
		{[]string{"--queues", "0"}, "--queues"},
		{[]string{"--spiders", "0"}, "--spiders"},
		{[]string{"--item-bytes", "NaN"}, "--item-bytes"},
		{[]string{"--retention-months", "-1"}, "--retention-months"},
		{[]string{"--log-bytes-per-page", "-5"}, "--log-bytes-per-page"},
		{[]string{"--runtime", "ec2"}, "--runtime"},
		{[]string{"--topology", "cheap"}, "--topology"},
		{[]string{"--topology", "lean", "--runtime", "lambda"}, "--runtime"},
		{[]string{"--var", "no_such_variable=1"}, "no_such_variable"},
		{[]string{"--var", "db_instance_class=db.x9.huge"}, "db_instance_class"},
		{[]string{"--var", "crawl_runtime=lambda", "--runtime", "ecs"}, "--runtime"},
	} {
		code, _, errs := run(t, "", append([]string{"cost"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.flag) {
			t.Errorf("cost %v: %d %q, want a usage error naming %s", c.args, code, errs, c.flag)
		}
	}
}

// Against real AWS (no AWS_ENDPOINT_URL), deploy refuses an empty alarm_email before running
// anything, and names the way out.
func TestDeployRefusesNoAlarmEmail(t *testing.T) {
	t.Parallel()
	code, _, errs := run(t, "", "deploy", "--dir", "../../terraform", "--work-dir", t.TempDir())
	if code != 2 || !strings.Contains(errs, "alarm_email is empty") || !strings.Contains(errs, "--allow-no-alarm-email") {
		t.Fatalf("deploy without alarm_email: %d %q", code, errs)
	}
}
