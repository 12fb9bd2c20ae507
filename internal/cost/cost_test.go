package cost_test

import (
	"errors"
	"math"
	"testing"

	"crawlq/internal/cost"
)

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("%s = %.6f, want %.6f (hand calculation)", what, got, want)
	}
}

// The default stack and the Lambda-only stack at 100 KB/page, 100M pages/month and 100 log
// bytes per page, against a calculation done by hand from the list prices.
func TestAgainstHandCalculation(t *testing.T) {
	w := cost.Workload{PageKB: 100, PagesPerMonth: 100e6, LogBytesPerPage: 100}

	// Default: 1e6 pages / 20 pages/s = 50,000 task-seconds = 13.8889 task-hours.
	// Fargate Spot: (1 × 0.04048 + 2 × 0.004445) × 0.3 = 0.014811 per hour → 0.205708.
	// Public IPv4: 13.8889 × 0.005 = 0.069444. NAT: bytes come through the internet gateway: 0.
	// Logs: 1e6 × 100 B = 0.1 GB × 0.50 = 0.05. S3: items go to Postgres: 0.
	// Fixed: NAT 0.045 × 730 = 32.85; RDS 0.065 × 730 + 50 × 0.115 = 53.20; proxy 2 × 0.015 × 730 = 21.90.
	e, err := cost.Compute(cost.DefaultStack(), w)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{
		"compute": {0.205708, 0}, "public IPv4": {0.069444, 0}, "NAT/egress": {0, 32.85},
		"RDS": {0, 53.20}, "RDS Proxy": {0, 21.90}, "logs": {0.05, 0}, "S3": {0, 0},
	}
	check := func(e cost.Estimate, want map[string][2]float64) {
		t.Helper()
		if len(e.Terms) != len(want) {
			t.Fatalf("%d terms, want %d", len(e.Terms), len(want))
		}
		for _, term := range e.Terms {
			w, ok := want[term.Name]
			if !ok {
				t.Fatalf("unexpected term %q", term.Name)
			}
			near(t, term.Name+" per million", term.PerMillion, w[0])
			near(t, term.Name+" fixed per month", term.FixedPerMonth, w[1])
		}
	}
	check(e, want)
	near(t, "default per million", e.PerMillion(), 0.325153)
	near(t, "default fixed per month", e.FixedPerMonth(), 107.95)
	near(t, "default per month", e.PerMonth(), 107.95+32.515278)
	near(t, "default all-in per million", e.AllInPerMillion(), (107.95+32.515278)/100)
	if e.PerMillion() > 1 {
		t.Errorf("the default stack costs $%.2f per million pages at 100 KB/page; the design promises under $1", e.PerMillion())
	}

	// Lambda only: 1e6 / 10 pages/s = 100,000 s × 0.5 GB × 0.0000133334 = 0.666670, plus
	// 333.33 invocations × 0.0000002 = 0.000067 → 0.666737.
	// NAT: 100 GB × 0.045 = 4.50, and half of it (one NAT in two zones) crosses zones:
	// 50 GB × 0.02 = 1.00 → 5.50. S3: 10,000 PUTs × 0.005/1000 = 0.05. Logs 0.05.
	l, err := cost.Compute(cost.LambdaStack(), w)
	if err != nil {
		t.Fatal(err)
	}
	check(l, map[string][2]float64{
		"compute": {0.666737, 0}, "public IPv4": {0, 0}, "NAT/egress": {5.50, 32.85},
		"RDS": {0, 53.20}, "RDS Proxy": {0, 21.90}, "logs": {0.05, 0}, "S3": {0.05, 0},
	})
	near(t, "lambda per million", l.PerMillion(), 6.266737) // 0.666737 + 5.50 + 0.05 + 0.05
}

func TestInvalid(t *testing.T) {
	s := cost.DefaultStack()
	s.PagesPerSecondPerTask = 0
	if _, err := cost.Compute(s, cost.Workload{PageKB: 100}); !errors.Is(err, cost.ErrInvalid) {
		t.Errorf("zero crawl rate: %v", err)
	}
	s = cost.DefaultStack()
	s.Runtime = "ec2"
	if _, err := cost.Compute(s, cost.Workload{}); !errors.Is(err, cost.ErrInvalid) {
		t.Errorf("unknown runtime: %v", err)
	}
	if _, err := cost.Compute(cost.DefaultStack(), cost.Workload{PageKB: -1}); !errors.Is(err, cost.ErrInvalid) {
		t.Errorf("negative page size: %v", err)
	}
}
