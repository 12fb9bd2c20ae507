package cli_test

import (
	"strings"
	"testing"
)

func TestCostCommand(t *testing.T) {
	t.Parallel()
	code, out, errs := run(t, "", "cost", "--page-kb", "100", "--pages-per-month", "100000000")
	if code != 0 {
		t.Fatalf("cost: %d %q", code, errs)
	}
	// The totals internal/cost's hand calculation gives for these inputs.
	for _, want := range []string{"list prices of 2025-06", "runtime: ecs", "runtime: lambda", "$0.325", "$6.267", "$107.95", "NAT/egress", "RDS Proxy"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errs := run(t, "", "cost", "--stack", "ec2"); code != 2 || !strings.Contains(errs, "--stack") {
		t.Errorf("bad --stack: %d %q", code, errs)
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
