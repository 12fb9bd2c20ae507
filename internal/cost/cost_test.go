package cost_test

import (
	"errors"
	"math"
	"testing"

	"crawlq/internal/cost"
)

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-5 {
		t.Errorf("%s = %.6f, want %.6f (hand calculation)", what, got, want)
	}
}

// term is one line of a hand calculation: per million pages, fixed per month.
type term struct{ perMillion, fixed float64 }

func checkTerms(t *testing.T, e cost.Estimate, want map[string]term) {
	t.Helper()
	got := map[string]bool{}
	for _, tm := range e.Terms {
		w, ok := want[tm.Name]
		if !ok {
			t.Errorf("term %q is not in the hand calculation", tm.Name)
			continue
		}
		got[tm.Name] = true
		near(t, tm.Name+" per million", tm.PerMillion, w.perMillion)
		near(t, tm.Name+" fixed per month", tm.FixedPerMonth, w.fixed)
		if tm.Basis == "" {
			t.Errorf("term %q says nothing of how it is made", tm.Name)
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("the bill lacks %q", name)
		}
	}
}

// The default stack (terraform/'s default variables) at `crawlq cost`'s default inputs: 100 million
// 100 KB pages a month, 2 queues, 10 spiders, 1,000 item bytes per page kept 1 month, 100 log bytes
// per page, crawling on the Fargate Spot runners. Every figure below is worked out by hand from
// the us-east-1 list prices (written out as numbers here, not read from the package).
//
// The goal of issue 32: at most $1 per million pages all-in at 100 M pages a month. The defaults
// of before (a NAT gateway, RDS Proxy, items in Postgres) came to $1.55 (TestStackOfBefore).
func TestDefaultStackAgainstHandCalculation(t *testing.T) {
	t.Parallel()
	e, err := cost.Compute(cost.DefaultStack(), cost.DefaultInputs())
	if err != nil {
		t.Fatal(err)
	}
	checkTerms(t, e, map[string]term{
		// 1e6 pages / 50 pages/s / 3600 = 5.555556 task-hours; a 1 vCPU, 2 GB task on Spot:
		// (1 × 0.04048 + 2 × 0.004445) × (1 − 0.70) = 0.014811 $/h → 5.555556 × 0.014811.
		"Fargate Spot runners": {0.082283, 0},
		// Each task holds a public IPv4: 5.555556 h × $0.005.
		"runner public IPv4": {0.027778, 0},
		// Sent per page: 600 B of request and TLS, and one 52 B ACK per two 1,448 B segments
		// received: 100,000 / 2,896 × 52 = 1,795.58 → 2,395.58 B × 1e6 = 2.39558 GB × $0.09.
		"outbound traffic (requests, ACKs, TLS)": {0.215602, 0},
		// The runners sit in public subnets: fetched bytes never touch NAT, inbound is free.
		"fetched bytes through NAT": {0, 0},
		// Items go to S3 (through the gateway endpoint, free): 800 B of queue traffic per page =
		// 0.8 GB per million, one hop (runner → instance, no proxy), crossing zones half the
		// time in 2 zones: 0.8 × 1 × 0.5 × $0.02.
		"cross-AZ to the database": {0.008, 0},
		// 100 B × 1e6 = 0.1 GB: ingest 0.1 × $0.50 = 0.05, stored 30 days = 30/30.416667 months:
		// 0.1 × 0.03 × 0.986301 = 0.002959.
		"logs per page": {0.052959, 0},
		// 1,000 B × 1e6 = 1 GB kept 1 month × $0.023, + 1e6 / 100 items an object = 10,000 PUTs
		// × $0.005/1000 = 0.05.
		"items in S3": {0.073, 0},
		// Fixed: a t4g.nano NAT instance 730 × 0.0042 = 3.066 + its 8 GB gp3 volume × 0.08 = 0.64;
		// its public IPv4 730 × 0.005.
		"NAT instance (t4g.nano)": {0, 3.706},
		"NAT public IPv4":         {0, 3.65},
		// db.t4g.small 730 × 0.032; 50 GB gp3 × 0.115; no RDS Proxy.
		"RDS instance": {0, 23.36},
		"RDS storage":  {0, 5.75},
		"RDS Proxy":    {0, 0},
		// 7 metrics × 2 queues + 9 spider totals + MonitorFailed per kind (4) = 27 × $0.30
		// (metrics_per_spider is off).
		"CloudWatch metrics (crawlq)": {0, 8.10},
		// Container Insights is off.
		"Container Insights metrics": {0, 0},
		"CloudWatch dashboard":       {0, 3.00},
		// 5 Lambda errors + RDS CPU + 4 monitor alarms + the NAT instance's status = 11 × $0.10;
		// 2 Metrics Insights alarms each analysing 2 queues' metric: 4 × $0.10.
		"CloudWatch alarms": {0, 1.50},
		// 2 ticks a minute × 43,800 minutes = 87,600 invocations × 400 B = 35.04 MB, plus
		// (2 + 10) EMF lines a minute × 43,800 × 400 B = 210.24 MB: 0.24528 GB × $0.50.
		"logs of the minute ticks": {0, 0.12264},
		// 87,600 × (1 s × 0.25 GB × 0.0000133334 + 0.0000002 + 0.000001 Scheduler) =
		// 87,600 × 0.00000453335.
		"minute ticks (Lambda + Scheduler)": {0, 0.397121},
		// The alarm key $1 + 10,000 requests × $0.03/10k.
		"KMS": {0, 1.03},
		// The RDS-managed master secret only (the application role logs in by IAM, without a
		// password): $0.40 + 10,000 calls × $0.05/10k.
		"Secrets Manager": {0, 0.45},
		"ECR images":      {0, 0.10},
	})
	// 0.082283 + 0.027778 + 0.215602 + 0 + 0.008 + 0.052959 + 0.073
	near(t, "per million", e.PerMillion(), 0.459622)
	// 3.706 + 3.65 + 23.36 + 5.75 + 0 + 8.10 + 0 + 3.00 + 1.50 + 0.12264 + 0.397121 + 1.03 + 0.45 + 0.10
	near(t, "fixed per month", e.FixedPerMonth(), 51.165761)
	near(t, "per month at 100 M", e.PerMonth(), 51.165761+45.962222)
	// 0.459622 + 51.165761 / 100
	near(t, "all-in per million at 100 M", e.AllInPerMillion(), 0.971280)
	if e.AllInPerMillion() > 1 {
		t.Errorf("the default stack costs $%.3f per million pages all-in at 100 M pages a month, want at most $1", e.AllInPerMillion())
	}
	// 51.165761 / (1 − 0.459622) = 94.69 M pages a month.
	if got := e.PagesPerMonthFor(1) / 1e6; math.Abs(got-94.69) > 0.01 {
		t.Errorf("$1 all-in from %.2f M pages/month, want 94.69 M", got)
	}
	if e.CustomMetrics != 27 {
		t.Errorf("%d custom metrics, want 27", e.CustomMetrics)
	}
	near(t, "items GB a month", e.ItemsGBPerMonth, 100) // 1,000 B × 1e8
	// Lambdas must not crawl without RDS Proxy: asking for a Lambda runtime gives the proxy back.
	in := cost.DefaultInputs()
	in.Runtime = cost.Lambda
	var ie *cost.InputError
	if _, err := cost.Compute(cost.DefaultStack(), in); !errors.As(err, &ie) || ie.Field != "Runtime" {
		t.Errorf("default stack crawling on lambda: %v, want an InputError naming Runtime", err)
	}
}

// The defaults of before (a NAT gateway, RDS Proxy, the runners' items in Postgres), as
// `crawlq cost --var nat=gateway --var db_proxy=on --var runner_items_to_s3=false` prices them.
func TestStackOfBefore(t *testing.T) {
	t.Parallel()
	s, err := cost.StackFor(map[string]string{"nat": "gateway", "db_proxy": "on", "runner_items_to_s3": "false"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := cost.Compute(s, cost.DefaultInputs())
	if err != nil {
		t.Fatal(err)
	}
	checkTerms(t, e, map[string]term{
		"Fargate Spot runners": {0.082283, 0}, "runner public IPv4": {0.027778, 0},
		"outbound traffic (requests, ACKs, TLS)": {0.215602, 0}, "fetched bytes through NAT": {0, 0},
		// 800 B of queue traffic + 1,000 B of items per page = 1.8 GB per million; two hops
		// (runner → proxy, proxy → instance), each crossing zones half the time: 1.8 × 2 × 0.5 × $0.02.
		"cross-AZ to the database": {0.036, 0},
		"logs per page":            {0.052959, 0},
		// 1,000 B × 1e6 = 1 GB kept 1 month on gp3 at $0.115.
		"items in Postgres": {0.115, 0},
		// One NAT gateway 730 × 0.045, and its Elastic IP 730 × 0.005.
		"NAT gateway": {0, 32.85}, "NAT public IPv4": {0, 3.65},
		"RDS instance": {0, 23.36}, "RDS storage": {0, 5.75},
		// RDS Proxy on 2 vCPU: 2 × 730 × 0.015.
		"RDS Proxy":                   {0, 21.90},
		"CloudWatch metrics (crawlq)": {0, 8.10}, "Container Insights metrics": {0, 0}, "CloudWatch dashboard": {0, 3.00},
		// 10 standard alarms (no NAT instance) + 4 Metrics Insights.
		"CloudWatch alarms": {0, 1.40}, "logs of the minute ticks": {0, 0.12264}, "minute ticks (Lambda + Scheduler)": {0, 0.397121},
		"KMS": {0, 1.03},
		// The master and the application role's secrets: 2 × $0.40 + $0.05.
		"Secrets Manager": {0, 0.85}, "ECR images": {0, 0.10},
	})
	near(t, "per million", e.PerMillion(), 0.529622)
	near(t, "fixed per month", e.FixedPerMonth(), 102.509761)
	near(t, "all-in per million at 100 M", e.AllInPerMillion(), 1.554720)
}

// The same inputs crawling on worker Lambdas behind the single NAT gateway, items to S3.
func TestLambdaRuntimeAgainstHandCalculation(t *testing.T) {
	t.Parallel()
	in := cost.DefaultInputs()
	in.Runtime = cost.Lambda
	s, err := cost.StackFor(map[string]string{"crawl_runtime": "lambda"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := cost.Compute(s, in)
	if err != nil {
		t.Fatal(err)
	}
	fixed := map[string]term{
		"NAT gateway": {0, 32.85}, "NAT public IPv4": {0, 3.65}, "RDS instance": {0, 23.36}, "RDS storage": {0, 5.75},
		"RDS Proxy": {0, 21.90}, "CloudWatch metrics (crawlq)": {0, 8.10}, "Container Insights metrics": {0, 0},
		"CloudWatch dashboard": {0, 3.00}, "CloudWatch alarms": {0, 1.40}, "logs of the minute ticks": {0, 0.12264},
		"minute ticks (Lambda + Scheduler)": {0, 0.397121}, "KMS": {0, 1.03}, "Secrets Manager": {0, 0.85}, "ECR images": {0, 0.10},
	}
	// 1e6 / 10 pages/s = 100,000 s × 0.5 GB × 0.0000133334 = 0.66667, + 100,000 / 300 = 333.33
	// invocations × 0.0000002 = 0.0000667.
	fixed["worker Lambdas"] = term{0.666737, 0}
	fixed["outbound traffic (requests, ACKs, TLS)"] = term{0.215602, 0}
	// (100,000 + 2,395.58) B × 1e6 = 102.39558 GB through NAT × $0.045 = 4.607801, and half of it
	// from the zone without the NAT gateway: 51.19779 GB × $0.02 = 1.023956.
	fixed["fetched bytes through NAT"] = term{5.631757, 0}
	// Items go to S3, so only the 800 B of queue traffic: 0.8 GB × 2 hops × 0.5 × $0.02.
	fixed["cross-AZ to the database"] = term{0.016, 0}
	fixed["logs per page"] = term{0.052959, 0}
	// 1 GB × 1 month × $0.023 + 1e6 / 100 items per object = 10,000 PUTs × $0.005/1000.
	fixed["items in S3"] = term{0.073, 0}
	checkTerms(t, e, fixed)
	near(t, "lambda per million", e.PerMillion(), 0.666737+0.215602+5.631757+0.016+0.052959+0.073)
	if !math.IsInf(e.PagesPerMonthFor(1), 1) {
		t.Errorf("Lambda crawling costs $%.2f per million before fixed costs; no volume reaches $1", e.PerMillion())
	}
}

func TestCustomMetrics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		queues, spiders int
		perSpider       bool
		want            int
	}{
		{2, 10, true, 148}, // 14 + 90 + 40 + 4
		{1, 1, true, 24},   // 7 + 9 + 4 + 4
		{2, 10, false, 27}, // 14 + 9 + 4
		{2, 100, false, 27},
	} {
		if got := cost.CustomMetrics(c.queues, c.spiders, c.perSpider); got != c.want {
			t.Errorf("CustomMetrics(%d, %d, %v) = %d, want %d", c.queues, c.spiders, c.perSpider, got, c.want)
		}
	}
}

func TestInputRanges(t *testing.T) {
	t.Parallel()
	for field, mutate := range map[string]func(*cost.Inputs){
		"PagesPerMonth":   func(in *cost.Inputs) { in.PagesPerMonth = 0 },
		"PageKB":          func(in *cost.Inputs) { in.PageKB = -1 },
		"Queues":          func(in *cost.Inputs) { in.Queues = 0 },
		"Spiders":         func(in *cost.Inputs) { in.Spiders = -3 },
		"ItemBytes":       func(in *cost.Inputs) { in.ItemBytes = math.NaN() },
		"RetentionMonths": func(in *cost.Inputs) { in.RetentionMonths = 5000 },
		"LogBytesPerPage": func(in *cost.Inputs) { in.LogBytesPerPage = -1 },
		"Runtime":         func(in *cost.Inputs) { in.Runtime = "ec2" },
	} {
		in := cost.DefaultInputs()
		mutate(&in)
		_, err := cost.Compute(cost.DefaultStack(), in)
		var ie *cost.InputError
		if !errors.Is(err, cost.ErrInvalid) || !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("bad %s: %v, want an InputError naming it", field, err)
		}
	}
	s := cost.DefaultStack()
	s.PagesPerSecondPerTask = 0
	if _, err := cost.Compute(s, cost.DefaultInputs()); !errors.Is(err, cost.ErrInvalid) {
		t.Errorf("zero crawl rate: %v", err)
	}
}
