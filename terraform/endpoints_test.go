package terraform_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// serviceOf maps a resource or data source type of the AWS provider to the provider's endpoint
// name for its service, and LocalStack's name for it. Types the provider computes locally map
// to "". A type missing here fails the test, so a new service cannot slip past the emulators.
var serviceOf = []struct{ prefix, endpoint, localstack string }{
	{"aws_iam_policy_document", "", ""},
	{"aws_partition", "", ""},
	{"aws_region", "", ""},
	{"aws_caller_identity", "sts", "sts"},
	{"aws_availability_zones", "ec2", "ec2"},
	{"aws_cloudwatch_event_", "events", "events"},
	{"aws_cloudwatch_log_", "cloudwatchlogs", "logs"},
	{"aws_cloudwatch_", "cloudwatch", "cloudwatch"},
	{"aws_db_", "rds", "rds"},
	{"aws_ecr_", "ecr", "ecr"},
	{"aws_ecs_", "ecs", "ecs"},
	{"aws_iam_", "iam", "iam"},
	{"aws_kms_", "kms", "kms"},
	{"aws_lambda_", "lambda", "lambda"},
	{"aws_s3_", "s3", "s3"},
	{"aws_scheduler_", "scheduler", "scheduler"},
	{"aws_secretsmanager_", "secretsmanager", "secretsmanager"},
	{"aws_sns_", "sns", "sns"},
	{"aws_eip", "ec2", "ec2"}, {"aws_internet_gateway", "ec2", "ec2"}, {"aws_nat_gateway", "ec2", "ec2"},
	{"aws_route", "ec2", "ec2"}, {"aws_security_group", "ec2", "ec2"}, {"aws_subnet", "ec2", "ec2"},
	{"aws_vpc", "ec2", "ec2"}, {"aws_instance", "ec2", "ec2"}, {"aws_network_interface", "ec2", "ec2"},
	{"aws_ssm_", "ssm", "ssm"},
}

// TestEmulatorEndpointsCoverEveryService: every AWS service the stack's resources call is
// pointed at the emulator by the provider's endpoints block (a missing one sends an emulated
// apply to real AWS: events was missing) and started by LocalStack's compose file.
func TestEmulatorEndpointsCoverEveryService(t *testing.T) {
	var files []string
	for _, g := range []string{"*.tf", "modules/*/*.tf"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	types := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^(?:resource|data|ephemeral) "(aws_\w+)"`).FindAllStringSubmatch(string(b), -1) {
			types[m[1]] = true
		}
	}
	if len(types) < 40 {
		t.Fatalf("found only %d AWS types in %d files; the scan is broken", len(types), len(files))
	}
	need := map[string]string{} // endpoint name -> LocalStack service
	for typ := range types {
		i := slices.IndexFunc(serviceOf, func(s struct{ prefix, endpoint, localstack string }) bool {
			return strings.HasPrefix(typ, s.prefix)
		})
		if i < 0 {
			t.Errorf("%s: which service does it call? add it to serviceOf", typ)
			continue
		}
		if serviceOf[i].endpoint != "" {
			need[serviceOf[i].endpoint] = serviceOf[i].localstack
		}
	}

	prov, err := os.ReadFile("providers.tf")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)endpoints \{(.*?)\n  \}`).FindSubmatch(prov)
	if block == nil {
		t.Fatal("providers.tf has no endpoints block")
	}
	compose, err := os.ReadFile("../localstack/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	svc := regexp.MustCompile(`SERVICES: (\S+)`).FindSubmatch(compose)
	if svc == nil {
		t.Fatal("localstack/docker-compose.yml sets no SERVICES")
	}
	started := strings.Split(string(svc[1]), ",")
	for ep, ls := range need {
		if !regexp.MustCompile(`(?m)^\s+` + ep + `\s+= local\.endpoint$`).Match(block[1]) {
			t.Errorf("providers.tf: the endpoints block lacks %s (an emulated apply would call real AWS)", ep)
		}
		if !slices.Contains(started, ls) {
			t.Errorf("localstack/docker-compose.yml: SERVICES lacks %s", ls)
		}
	}
}
