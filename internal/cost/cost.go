// Package cost owns crawlq's cost model on AWS: what a million crawled pages and a month of the
// stack cost, term by term (compute, NAT and egress, RDS, RDS Proxy, logs, S3), for a stack
// shape (the default Fargate crawl fleet in public subnets, or Lambda workers behind NAT) and a
// workload, at public list prices that are named constants with the date they were read.
// `crawlq cost` prints it; the model is arithmetic only, so a test checks it by hand.
package cost

import (
	"errors"
	"fmt"
)

// PricesDate is when the list prices below were read (us-east-1, on-demand, USD).
const PricesDate = "2025-06"

// Public list prices, us-east-1, USD.
const (
	FargateVCPUHour     = 0.04048  // Fargate Linux/x86, per vCPU-hour
	FargateGBHour       = 0.004445 // Fargate Linux/x86, per GB of memory-hour
	FargateSpotDiscount = 0.70     // Fargate Spot's discount off on-demand ("up to 70%"; the spot price moves)
	PublicIPv4Hour      = 0.005    // per in-use public IPv4 address-hour (each Fargate task with a public IP)
	LambdaGBSecondArm   = 0.0000133334
	LambdaRequest       = 0.20 / 1e6 // per invocation
	NATHour             = 0.045      // per NAT gateway-hour
	NATPerGB            = 0.045      // per GB a NAT gateway processes
	CrossAZPerGB        = 0.02       // per GB between zones ($0.01 out + $0.01 in)
	InternetInPerGB     = 0.0        // data in from the internet is free
	RDSt4gMediumHour    = 0.065      // db.t4g.medium, PostgreSQL, Single-AZ
	RDSGp3GBMonth       = 0.115      // gp3 storage per GB-month, Single-AZ
	RDSProxyVCPUHour    = 0.015      // RDS Proxy per vCPU of the instance behind it (2 vCPU minimum)
	LogsIngestPerGB     = 0.50       // CloudWatch Logs ingestion
	S3PutPer1000        = 0.005      // S3 Standard PUT/COPY/POST/LIST per 1,000 requests
	S3GBMonth           = 0.023      // S3 Standard storage, first 50 TB
	HoursPerMonth       = 730.0
)

// Runtime is where crawl jobs run.
type Runtime string

const (
	// Fargate runs crawl jobs on Fargate (Spot) tasks in public subnets with public IPs: fetched
	// bytes come in through the internet gateway (free), not through NAT.
	Fargate Runtime = "fargate"
	// Lambda runs crawl jobs on worker Lambdas in private subnets: every fetched byte pays NAT
	// processing, and the share from zones without the NAT gateway pays cross-zone transfer.
	Lambda Runtime = "lambda"
)

// Stack is the shape of a deployment, as terraform/variables.tf sets it. Zero fields are not
// defaulted: use DefaultStack or LambdaStack and change what differs.
type Stack struct {
	Name    string
	Runtime Runtime
	// Fargate: a runner task's size, whether it runs on Spot, and its crawl rate.
	TaskVCPU, TaskMemoryGB float64
	Spot                   bool
	PagesPerSecondPerTask  float64
	// Lambda: a worker's memory and its crawl rate (Lambda bills wall-clock time).
	WorkerMemoryGB          float64
	PagesPerSecondPerWorker float64
	InvocationSeconds       float64 // a worker invocation's length (the worker timeout)
	// Network: zones, and NAT gateways (1 with single_nat_gateway, else one per zone).
	Zones, NATGateways int
	// Database: the instance's hourly price, its vCPUs (RDS Proxy bills them) and storage.
	DBHour        float64
	DBVCPU        int
	DBStorageGB   float64
	ProxyMinVCPU  int
	ItemsToS3     bool // items are written to S3 (the worker's sink); the runner writes them to Postgres
	S3PutsPerPage float64
}

// DefaultStack is terraform/'s default network with crawl jobs on the Fargate Spot runner fleet
// in public subnets (spiders declared `runtime: ecs`): 1 vCPU, 2 GB tasks at 20 pages/s each
// (the runner's concurrency set to 20 at about a second per page), two zones, one NAT gateway
// (the functions' AWS calls), db.t4g.medium with 50 GB, items in Postgres.
func DefaultStack() Stack {
	return Stack{Name: "fargate: Fargate Spot runners in public subnets (spiders with runtime: ecs)", Runtime: Fargate, TaskVCPU: 1, TaskMemoryGB: 2, Spot: true,
		PagesPerSecondPerTask: 20, Zones: 2, NATGateways: 1, DBHour: RDSt4gMediumHour, DBVCPU: 2, DBStorageGB: 50, ProxyMinVCPU: 2}
}

// LambdaStack is the Lambda-only stack: crawl jobs on 512 MB worker Lambdas in private subnets
// (spiders with the default `runtime: lambda`; 10 jobs at once, about 10 pages/s), items to S3
// in batches of 100, otherwise as DefaultStack.
func LambdaStack() Stack {
	s := DefaultStack()
	s.Name, s.Runtime = "lambda: worker Lambdas behind NAT (spiders with runtime: lambda)", Lambda
	s.WorkerMemoryGB, s.PagesPerSecondPerWorker, s.InvocationSeconds = 0.5, 10, 300
	s.ItemsToS3, s.S3PutsPerPage = true, 0.01
	return s
}

// Workload is what is crawled.
type Workload struct {
	PageKB          float64 // average page size in KB (1 KB = 1000 bytes); default in the CLI 100
	PagesPerMonth   float64 // the rate the monthly figures and the all-in price assume
	LogBytesPerPage float64 // log lines written per page (CloudWatch Logs ingestion)
}

// Term is one line of the bill.
type Term struct {
	Name string
	// PerMillion is the cost that grows with pages, per million pages.
	PerMillion float64
	// FixedPerMonth is the cost that runs whether or not anything is crawled.
	FixedPerMonth float64
}

// Estimate is a stack's bill for a workload.
type Estimate struct {
	Stack    Stack
	Workload Workload
	Terms    []Term
}

// PerMillion is the variable cost of a million pages (no fixed costs).
func (e Estimate) PerMillion() float64 {
	var s float64
	for _, t := range e.Terms {
		s += t.PerMillion
	}
	return s
}

// FixedPerMonth is the monthly cost of the stack standing idle.
func (e Estimate) FixedPerMonth() float64 {
	var s float64
	for _, t := range e.Terms {
		s += t.FixedPerMonth
	}
	return s
}

// PerMonth is the monthly bill at Workload.PagesPerMonth.
func (e Estimate) PerMonth() float64 {
	return e.FixedPerMonth() + e.PerMillion()*e.Workload.PagesPerMonth/1e6
}

// AllInPerMillion is PerMonth spread over the month's pages: what a million pages cost with
// the stack's fixed costs shared out at this rate.
func (e Estimate) AllInPerMillion() float64 {
	if e.Workload.PagesPerMonth <= 0 {
		return 0
	}
	return e.PerMonth() / (e.Workload.PagesPerMonth / 1e6)
}

// ErrInvalid is returned (wrapped, naming the field) for a Stack or Workload the model cannot price.
var ErrInvalid = errors.New("cost: invalid input")

func (s Stack) validate() error {
	switch {
	case s.Runtime != Fargate && s.Runtime != Lambda:
		return fmt.Errorf("%w: Runtime %q: want fargate or lambda", ErrInvalid, s.Runtime)
	case s.Runtime == Fargate && (s.TaskVCPU <= 0 || s.TaskMemoryGB <= 0 || s.PagesPerSecondPerTask <= 0):
		return fmt.Errorf("%w: TaskVCPU, TaskMemoryGB and PagesPerSecondPerTask must be positive for fargate", ErrInvalid)
	case s.Runtime == Lambda && (s.WorkerMemoryGB <= 0 || s.PagesPerSecondPerWorker <= 0 || s.InvocationSeconds <= 0):
		return fmt.Errorf("%w: WorkerMemoryGB, PagesPerSecondPerWorker and InvocationSeconds must be positive for lambda", ErrInvalid)
	case s.Zones < 1 || s.NATGateways < 0 || s.NATGateways > s.Zones:
		return fmt.Errorf("%w: Zones %d, NATGateways %d: want 1+ zones and at most one NAT gateway each", ErrInvalid, s.Zones, s.NATGateways)
	}
	return nil
}

// Compute prices a stack for a workload.
func Compute(s Stack, w Workload) (Estimate, error) {
	if err := s.validate(); err != nil {
		return Estimate{}, err
	}
	if w.PageKB < 0 || w.PagesPerMonth < 0 || w.LogBytesPerPage < 0 {
		return Estimate{}, fmt.Errorf("%w: Workload fields must not be negative", ErrInvalid)
	}
	const pages = 1e6
	gb := w.PageKB * 1000 * pages / 1e9 // fetched GB per million pages
	var compute, ips, nat float64
	switch s.Runtime {
	case Fargate:
		hours := pages / s.PagesPerSecondPerTask / 3600 // task-hours per million pages
		rate := s.TaskVCPU*FargateVCPUHour + s.TaskMemoryGB*FargateGBHour
		if s.Spot {
			rate *= 1 - FargateSpotDiscount
		}
		compute = hours * rate
		ips = hours * PublicIPv4Hour
		nat = gb * InternetInPerGB // through the internet gateway: free
	case Lambda:
		seconds := pages / s.PagesPerSecondPerWorker
		compute = seconds*s.WorkerMemoryGB*LambdaGBSecondArm + seconds/s.InvocationSeconds*LambdaRequest
		// Every fetched byte passes NAT; with fewer NAT gateways than zones, the workers in the
		// zones without one send their share across zones to it.
		crossShare := 0.0
		if s.NATGateways > 0 && s.NATGateways < s.Zones {
			crossShare = float64(s.Zones-s.NATGateways) / float64(s.Zones)
		}
		nat = gb*NATPerGB + gb*crossShare*CrossAZPerGB
	}
	var s3 float64
	if s.ItemsToS3 {
		s3 = pages * s.S3PutsPerPage / 1000 * S3PutPer1000
	}
	proxyVCPU := max(s.DBVCPU, s.ProxyMinVCPU)
	terms := []Term{
		{Name: "compute", PerMillion: compute},
		{Name: "public IPv4", PerMillion: ips},
		{Name: "NAT/egress", PerMillion: nat, FixedPerMonth: float64(s.NATGateways) * NATHour * HoursPerMonth},
		{Name: "RDS", FixedPerMonth: s.DBHour*HoursPerMonth + s.DBStorageGB*RDSGp3GBMonth},
		{Name: "RDS Proxy", FixedPerMonth: float64(proxyVCPU) * RDSProxyVCPUHour * HoursPerMonth},
		{Name: "logs", PerMillion: pages * w.LogBytesPerPage / 1e9 * LogsIngestPerGB},
		{Name: "S3", PerMillion: s3},
	}
	return Estimate{Stack: s, Workload: w, Terms: terms}, nil
}
