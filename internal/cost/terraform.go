package cost

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// TerraformDefaults are the defaults of the terraform/variables.tf variables that change the
// bill, written as `terraform -var` takes them. StackFor starts from these; a test in this
// package holds them to variables.tf, so a changed default there fails here until the model
// follows.
var TerraformDefaults = map[string]string{
	"az_count":             "2",
	"single_nat_gateway":   "true",
	"nat":                  "auto",
	"db_proxy":             "auto",
	"nat_instance_type":    "t4g.nano",
	"db_instance_class":    "db.t4g.small",
	"db_allocated_storage": "50",
	"db_multi_az":          "false",
	"crawl_runtime":        "fargate",
	"crawl_lambda_burst":   "0",
	"crawl_concurrency":    "50",
	"runner_cpu":           "1024",
	"runner_memory":        "2048",
	"worker_memory":        "512",
	"worker_timeout":       "300",
	"container_insights":   "false",
	"log_retention_days":   "30",
	"region":               "us-east-1",
	"scrapyd_api":          "false",
	"metrics_per_spider":   "false",
	"runner_items_to_s3":   "true",
}

// dbClasses are the instance classes StackFor can price: hourly Single-AZ price and vCPUs.
var dbClasses = map[string]struct {
	hour float64
	vcpu int
}{
	"db.t4g.micro":  {RDSt4gMicroHour, 2},
	"db.t4g.small":  {RDSt4gSmallHour, 2},
	"db.t4g.medium": {RDSt4gMediumHour, 2},
	"db.t4g.large":  {RDSt4gLargeHour, 2},
}

// VarError names the terraform variable StackFor cannot price.
type VarError struct {
	Var string // the terraform variable
	Msg string
}

func (e *VarError) Error() string { return fmt.Sprintf("cost: terraform variable %s %s", e.Var, e.Msg) }

func (e *VarError) Unwrap() error { return ErrInvalid }

// StackFor is the stack terraform/ deploys with vars (variable name to value, as `crawlq deploy
// --var` passes them) and TerraformDefaults for the rest. A variable the model does not price
// is refused by name, so the bill never silently describes another stack than the one deployed;
// so are values it cannot price (an instance class without a known price, Lambda bursting).
func StackFor(vars map[string]string) (Stack, error) {
	v := maps.Clone(TerraformDefaults)
	for k, val := range vars {
		if _, ok := v[k]; !ok {
			return Stack{}, &VarError{Var: k, Msg: fmt.Sprintf("is not priced by this model (it prices %v)", slices.Sorted(maps.Keys(TerraformDefaults)))}
		}
		v[k] = val
	}
	var errs []error
	num := func(k string, lo, hi float64) float64 {
		f, err := strconv.ParseFloat(v[k], 64)
		if err != nil || f < lo || f > hi {
			errs = append(errs, &VarError{Var: k, Msg: fmt.Sprintf("%q: want a number from %g to %g", v[k], lo, hi)})
			return lo
		}
		return f
	}
	flag := func(k string) bool {
		b, err := strconv.ParseBool(v[k])
		if err != nil {
			errs = append(errs, &VarError{Var: k, Msg: fmt.Sprintf("%q: want true or false", v[k])})
		}
		return b
	}
	s := Stack{
		TaskVCPU: num("runner_cpu", 256, 16384) / 1024, TaskMemoryGB: num("runner_memory", 512, 122880) / 1024, Spot: true,
		PagesPerSecondPerTask: num("crawl_concurrency", 1, 1000) * PagesPerSecondPerJob,
		WorkerMemoryGB:        num("worker_memory", 128, 10240) / 1024, PagesPerSecondPerWorker: WorkerPagesPerSecond,
		InvocationSeconds: num("worker_timeout", 1, 900),
		Zones:             int(num("az_count", 2, 6)),
		DBStorageGB:       num("db_allocated_storage", 20, 65536),
		Dashboards:        1, StandardAlarms: defaultFunctions + 1 + defaultMonitorKinds, InsightsAlarms: 2,
		Secrets: 1, KMSKeys: 1, S3ItemsPerPut: 100, PerSpiderMetrics: flag("metrics_per_spider"),
		// The runners write items to the items bucket (CRAWLQ_ITEMS_BUCKET), as the worker does.
		ItemsToS3ForECS:  flag("runner_items_to_s3"),
		LogRetentionDays: num("log_retention_days", 1, 3653),
	}
	s.NATGateways = s.Zones
	if flag("single_nat_gateway") {
		s.NATGateways = 1
	}
	// terraform/main.tf's local.lambda_crawls, which both "auto"s below follow.
	lambdaCrawls := v["crawl_runtime"] != "fargate" || v["crawl_lambda_burst"] != "0"
	// terraform/main.tf's local.nat_instance.
	switch v["nat"] {
	case "instance":
		s.NATInstance = true
	case "auto":
		s.NATInstance = !lambdaCrawls
	case "gateway":
	default:
		errs = append(errs, &VarError{Var: "nat", Msg: fmt.Sprintf("%q: want auto, instance or gateway", v["nat"])})
	}
	// terraform/main.tf's local.db_proxy: RDS Proxy when asked, or when a Lambda crawls (hundreds
	// of short-lived connections); else clients connect to the instance (IAM auth) and the
	// application role needs no password secret.
	switch v["db_proxy"] {
	case "on":
		s.Proxy = true
	case "auto":
		s.Proxy = lambdaCrawls
	default:
		errs = append(errs, &VarError{Var: "db_proxy", Msg: fmt.Sprintf("%q: want auto or on", v["db_proxy"])})
	}
	if s.Proxy {
		s.Secrets++ // the application role's password, which the proxy logs in with
	}
	if s.NATInstance {
		s.NATGateways = 0
		s.StandardAlarms++ // its status checks
		if v["nat_instance_type"] != "t4g.nano" {
			errs = append(errs, &VarError{Var: "nat_instance_type", Msg: fmt.Sprintf("%q: only t4g.nano is priced", v["nat_instance_type"])})
		}
	}
	if flag("scrapyd_api") {
		s.Secrets++ // the Scrapyd API's basic-auth credentials
	}
	if flag("container_insights") {
		s.InsightsMetrics = defaultInsightsMetrics
	}
	s.DBClass = v["db_instance_class"]
	if c, ok := dbClasses[s.DBClass]; ok {
		s.DBHour, s.DBVCPU = c.hour, c.vcpu
	} else {
		errs = append(errs, &VarError{Var: "db_instance_class", Msg: fmt.Sprintf("%q: no price known; want one of %v", s.DBClass, slices.Sorted(maps.Keys(dbClasses)))})
	}
	if flag("db_multi_az") {
		// A standby in a second zone: twice the instance and the storage (the proxy bills the
		// primary's vCPUs only).
		s.MultiAZ = true
	}
	switch v["crawl_runtime"] {
	case "fargate":
		s.RuntimesSupported = []Runtime{ECS}
	case "lambda":
		s.RuntimesSupported = []Runtime{Lambda}
	default:
		errs = append(errs, &VarError{Var: "crawl_runtime", Msg: fmt.Sprintf("%q: want fargate or lambda", v["crawl_runtime"])})
	}
	if b := num("crawl_lambda_burst", 0, 1e6); b != 0 {
		errs = append(errs, &VarError{Var: "crawl_lambda_burst", Msg: "is not priced: pages fetched by bursting Lambdas depend on the backlog; price crawl_runtime=lambda for the worst case"})
	}
	if v["region"] != "us-east-1" {
		errs = append(errs, &VarError{Var: "region", Msg: fmt.Sprintf("%q: the model holds us-east-1 prices only", v["region"])})
	}
	if err := errors.Join(errs...); err != nil {
		return Stack{}, err
	}
	s.Name = "default (terraform/ as deployed)"
	if len(vars) > 0 {
		s.Name = fmt.Sprintf("terraform/ with %v", sortedVars(vars))
	}
	return s, nil
}

func sortedVars(vars map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out
}
