package cli_test

import (
	"fmt"
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
	// default inputs (100 KB pages, 2 queues, 10 spiders, 1 KB items kept a month): at most $1
	// per million pages all-in at 100 M pages a month (issue 32; the defaults of before: $1.555).
	for _, want := range []string{"list prices read 2025-06", "topology default (terraform/ as deployed)",
		"Fargate Spot runners", "runner public IPv4", "outbound traffic (requests, ACKs, TLS)", "fetched bytes through NAT",
		"cross-AZ to the database", "logs per page", "items in S3", "NAT instance (t4g.nano)", "NAT public IPv4", "RDS instance",
		"RDS storage", "RDS Proxy", "none: clients connect to the instance", "CloudWatch metrics (crawlq)", "27 = 7 x 2 queues + 9 spider totals + 4 monitors",
		"Container Insights metrics", "CloudWatch dashboard", "CloudWatch alarms", "logs of the minute ticks", "minute ticks (Lambda + Scheduler)", "KMS",
		"Secrets Manager", "1 secrets", "ECR images",
		"$0.4596", "$51.17", "all-in per million pages at 100000000 pages/month: $0.971",
		"$1 per million pages all-in: from 95 million pages/month"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost output lacks %q:\n%s", want, out)
		}
	}
	var allIn float64
	if _, err := fmt.Sscanf(out[strings.Index(out, "all-in per million pages at 100000000 pages/month: $"):], "all-in per million pages at 100000000 pages/month: $%f", &allIn); err != nil || allIn > 1 {
		t.Errorf("all-in per million pages at 100 M pages a month: $%v (%v), want at most $1", allIn, err)
	}
	// The stack as deployed with other variables: the defaults of issue 32's bill.
	code, out, errs = run(t, "", "cost", "--var", "db_instance_class=db.t4g.medium", "--var", "container_insights=true", "--var", "crawl_concurrency=20",
		"--var", "metrics_per_spider=true", "--var", "nat=gateway", "--var", "db_proxy=on", "--var", "runner_items_to_s3=false")
	if code != 0 {
		t.Fatalf("cost --var: %d %q", code, errs)
	}
	for _, want := range []string{"terraform/ with [container_insights=true crawl_concurrency=20 db_instance_class=db.t4g.medium db_proxy=on metrics_per_spider=true nat=gateway runner_items_to_s3=false]",
		"148 = 7 x 2 queues", "NAT gateway", "items in Postgres", "RDS storage autoscaling stops at 200 GB",
		"$0.6947", "$169.50", "all-in per million pages at 100000000 pages/month: $2.390"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost --var output lacks %q:\n%s", want, out)
		}
	}
	// Lambdas crawling bring back the NAT gateway and RDS Proxy (db_proxy and nat "auto").
	code, out, errs = run(t, "", "cost", "--var", "crawl_runtime=lambda")
	if code != 0 || !strings.Contains(out, "crawling on lambda") || !strings.Contains(out, "worker Lambdas") || !strings.Contains(out, "NAT gateway") ||
		!strings.Contains(out, "2 vCPU x 730 h") {
		t.Errorf("cost --var crawl_runtime=lambda: %d %q\n%s", code, errs, out)
	}
	code, out, errs = run(t, "", "cost", "--spiders", "100", "--var", "metrics_per_spider=true")
	if code != 0 || !strings.Contains(out, "1318 = 7 x 2 queues") {
		t.Errorf("cost --spiders 100 --var metrics_per_spider=true: %d %q\n%s", code, errs, out)
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
		{[]string{"--var", "db_proxy=off"}, "db_proxy"},
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
