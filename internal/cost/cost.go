// Package cost owns crawlq's cost model on AWS: the whole monthly bill of a deployed stack, term
// by term, split into what grows with pages (per million pages) and what runs whether or not
// anything is crawled (per month), at public us-east-1 list prices that are named constants with
// their source and the date they were read. A Stack is a topology (the one terraform/ deploys by
// default, or an alternative), Inputs are the workload. `crawlq cost` prints it; the model is
// arithmetic only, so a test checks it against a calculation done by hand.
package cost

import (
	"errors"
	"fmt"
	"math"

	"crawlq/internal/metrics"
	"crawlq/internal/spider"
)

// PricesDate is when the list prices below were read (us-east-1, on-demand, USD, no free tier:
// an account's other use takes it).
const PricesDate = "2025-06"

// Public list prices, us-east-1, USD, read in PricesDate from the page named beside each.
const (
	// https://aws.amazon.com/fargate/pricing/ (Linux/x86)
	FargateVCPUHour     = 0.04048  // per vCPU-hour
	FargateGBHour       = 0.004445 // per GB of memory-hour
	FargateSpotDiscount = 0.70     // Fargate Spot's discount off on-demand ("up to 70%"; the spot price moves)
	// https://aws.amazon.com/vpc/pricing/ (public IPv4 addresses, since 2024-02)
	PublicIPv4Hour = 0.005 // per in-use public IPv4 address-hour (a Fargate task's, a NAT gateway's EIP)
	// https://aws.amazon.com/lambda/pricing/ (Arm)
	LambdaGBSecondArm = 0.0000133334
	LambdaRequest     = 0.20 / 1e6 // per invocation
	// https://aws.amazon.com/vpc/pricing/ (NAT gateways)
	NATHour  = 0.045 // per NAT gateway-hour
	NATPerGB = 0.045 // per GB a NAT gateway processes, in either direction
	// https://aws.amazon.com/ec2/pricing/on-demand/ (t4g.nano, Linux; a NAT instance)
	T4gNanoHour = 0.0042
	// https://aws.amazon.com/ebs/pricing/ (gp3; the NAT instance's 8 GB root volume)
	EBSGp3GBMonth = 0.08
	NATVolumeGB   = 8
	// https://aws.amazon.com/ec2/pricing/on-demand/ (data transfer)
	InternetOutPerGB = 0.09 // to the internet, first 10 TB/month
	CrossAZPerGB     = 0.02 // between zones: $0.01 out of one + $0.01 into the other
	// https://aws.amazon.com/rds/postgresql/pricing/ (Single-AZ)
	RDSt4gLargeHour  = 0.129 // db.t4g.large: 2 vCPU, 8 GiB
	RDSt4gMediumHour = 0.065 // db.t4g.medium: 2 vCPU, 4 GiB
	RDSt4gSmallHour  = 0.032 // db.t4g.small: 2 vCPU, 2 GiB
	RDSt4gMicroHour  = 0.016 // db.t4g.micro: 2 vCPU, 1 GiB
	RDSGp3GBMonth    = 0.115 // gp3 storage per GB-month
	// https://aws.amazon.com/rds/proxy/pricing/
	RDSProxyVCPUHour = 0.015 // per vCPU of the instance behind it, 2 vCPU minimum
	// https://aws.amazon.com/cloudwatch/pricing/
	MetricMonth        = 0.30 // per custom metric-month, first 10,000
	DashboardMonth     = 3.00 // per dashboard-month
	AlarmMonth         = 0.10 // per standard-resolution alarm metric-month
	InsightsAlarmMonth = 0.10 // per metric a Metrics Insights query alarm analyzes, per month
	LogsIngestPerGB    = 0.50 // CloudWatch Logs standard ingestion
	LogsStoreGBMonth   = 0.03 // CloudWatch Logs archive storage
	// https://aws.amazon.com/eventbridge/pricing/ (Scheduler)
	SchedulerInvocation = 1.00 / 1e6
	// https://aws.amazon.com/kms/pricing/
	KMSKeyMonth   = 1.00       // per customer managed key-month
	KMSPerReq     = 0.03 / 1e4 // per request
	SecretMonth   = 0.40       // https://aws.amazon.com/secrets-manager/pricing/ per secret-month
	SecretPerReq  = 0.05 / 1e4 // per API call
	ECRGBMonth    = 0.10       // https://aws.amazon.com/ecr/pricing/ storage per GB-month
	S3PutPer1000  = 0.005      // https://aws.amazon.com/s3/pricing/ PUT per 1,000 requests
	S3GBMonth     = 0.023      // S3 Standard storage, first 50 TB
	HoursPerMonth = 730.0
	DaysPerMonth  = HoursPerMonth / 24
)

// Traffic a fetched page causes besides its own bytes (assumptions, not prices).
const (
	// RequestBytesPerPage is what a fetch sends besides ACKs: the request and its TLS record, and
	// a share of the TLS handshakes. Measured (2026-11-24, Go's HTTP/1.1 client against a loopback
	// TLS server, 100 KB pages, TCP payload the client wrote): 261 B a page on a kept-alive
	// connection, 1,842 B with a new connection each page; 600 B is a new connection every
	// five pages or so.
	RequestBytesPerPage = 600
	// ACKBytesPerSegmentPair: TCP acknowledges every second received segment of 1,448 payload
	// bytes with a 52-byte packet (IP 20 + TCP 20 + timestamps 12).
	ACKBytesPerSegmentPair = 52
	SegmentPairBytes       = 2 * 1448
	// DBWireBytesPerPage is a page's database traffic besides its items: its share of the claim
	// batch, completion, stats, and the URLs it discovered, both directions. Measured (2026-11-24,
	// TCP payload through a counting proxy, `crawlq bench --op crawl --workers 1 --concurrency 20
	// --batch 20` in exec mode, a runner's batches): 782 B a page with ~100 B items in it
	// (364 B with the bench's default batches of 5,000); 800 B leaves room for TLS records.
	DBWireBytesPerPage = 800
)

// The standing work of every stack (assumptions): the dispatch and metrics ticks each minute.
const (
	TicksPerMonth    = 2 * 60 * HoursPerMonth // dispatch + metrics, rate(1 minute) each
	TickSeconds      = 1.0                    // an invocation's billed duration
	TickMemoryGB     = 0.25                   // 256 MB functions
	TickLogBytes     = 400                    // START/END/REPORT and a line per invocation
	EMFLineBytes     = 400                    // one metrics line per queue and per spider each minute
	KMSRequestsMonth = 10000                  // the alarm key: SNS publishes, key rotation, console
	SecretCallsMonth = 10000                  // RDS Proxy reading its secrets as it opens connections; the migrate function's reads
	ECRStoredGB      = 1.0                    // runner images kept (up to 20, layers shared)
)

// Crawl rates (assumptions): a crawl job takes about a second a page, fetch and parse, so a
// runner task crawls crawl_concurrency pages a second; a worker Lambda works its batch at
// about 10 pages a second.
const (
	PagesPerSecondPerJob = 1.0
	WorkerPagesPerSecond = 10.0
)

// Runtime is where crawl jobs run.
type Runtime string

const (
	// ECS runs crawl jobs on Fargate Spot runner tasks in public subnets with public IPs (the
	// default, crawl_runtime = "fargate"): fetched bytes come in through the internet gateway,
	// free; items go to S3 (runner_items_to_s3) or Postgres.
	ECS Runtime = "ecs"
	// Lambda runs crawl jobs on worker Lambdas in private subnets (crawl_runtime = "lambda"):
	// every byte they fetch or send passes NAT; items go to S3.
	Lambda Runtime = "lambda"
)

// Stack is a topology: what is deployed and how it crawls. Use DefaultStack or StackFor and
// change what differs; zero fields are not defaulted.
type Stack struct {
	Name string
	// Runner tasks (ECS): size, Spot, crawl rate (crawl_concurrency at about a second per page).
	TaskVCPU, TaskMemoryGB float64
	Spot                   bool
	PagesPerSecondPerTask  float64
	// Worker Lambdas: memory and crawl rate (Lambda bills wall-clock time).
	WorkerMemoryGB          float64
	PagesPerSecondPerWorker float64
	InvocationSeconds       float64 // a worker invocation's length (the worker timeout)
	// Network: zones; NAT gateways (1 with single_nat_gateway, else one per zone), or a NAT
	// instance in their place.
	Zones       int
	NATGateways int
	NATInstance bool
	// Database: the instance's hourly price and vCPUs, allocated storage, and whether clients
	// reach it through RDS Proxy.
	DBClass     string
	DBHour      float64
	DBVCPU      int
	DBStorageGB float64
	MultiAZ     bool // a standby instance in another zone: twice the instance and its storage
	Proxy       bool
	// Observability: whether crawlq's spider metrics carry a Spider dimension, Container Insights
	// metrics (0: off), dashboards and standard alarms (5 Lambda errors, RDS CPU, 4 monitors).
	PerSpiderMetrics  bool
	InsightsMetrics   int
	Dashboards        int
	StandardAlarms    int
	InsightsAlarms    int // Metrics Insights query alarms over every queue (dead jobs, oldest past-due)
	Secrets           int
	KMSKeys           int
	ItemsToS3ForECS   bool    // runners write items to S3 as the worker does (else Postgres, kept forever)
	S3ItemsPerPut     float64 // items batched into one S3 object
	RuntimesSupported []Runtime
	LogRetentionDays  float64 // log groups' retention (log_retention_days)
}

// Terraform defaults (terraform/variables.tf, modules/*) the stacks below mirror.
var defaultMonitorKinds = len(spider.MonitorKinds()) // one alarm each (terraform/events.tf)

const (
	defaultFunctions = 5 // api, worker, dispatch, metrics, migrate: one errors alarm each
	// Container Insights (container_insights = true) on a Fargate cluster whose tasks run one
	// family: 12 metrics by ClusterName (CPU, memory and ephemeral storage reserved/utilized,
	// network rx/tx, storage read/write, TaskCount, ServiceCount) and 10 by ClusterName +
	// TaskDefinitionFamily (the same less the two counts).
	defaultInsightsMetrics = 22
)

// DefaultStack is what terraform/ deploys with its default variables (TerraformDefaults):
// two zones, a t4g.nano NAT instance for the functions' AWS calls (nat = "auto": no Lambda
// crawls), db.t4g.small with 50 GB reached directly with IAM auth (db_proxy = "auto": no RDS
// Proxy when no Lambda crawls), 1 vCPU / 2 GB Fargate Spot runners at crawl_concurrency 50
// (50 pages/s) writing items to S3 in batches of 100, metrics per queue and spider totals,
// Container Insights off, one dashboard, 11 standard and 2 Metrics Insights alarms, one secret
// (the RDS-managed master secret) and the alarm topic's KMS key. What each choice costs in
// reliability is in docs/cost.md.
func DefaultStack() Stack {
	s, err := StackFor(nil)
	if err != nil {
		panic(fmt.Sprintf("cost: TerraformDefaults cannot be priced: %v", err)) // a test holds them
	}
	return s
}

// Inputs is the workload. Ranges are checked by Validate.
type Inputs struct {
	PagesPerMonth   float64 // pages crawled a month
	PageKB          float64 // average fetched page, KB (1 KB = 1000 bytes)
	Queues          int     // queues that exist (crawlq metrics are written per queue)
	Spiders         int     // spiders that run in a month (metrics per spider and per spider and monitor)
	ItemBytes       float64 // item bytes stored per page
	RetentionMonths float64 // how long items are kept (the default stack keeps them forever)
	LogBytesPerPage float64 // log bytes written per page (CloudWatch Logs)
	Runtime         Runtime
}

// DefaultInputs are `crawlq cost`'s defaults.
func DefaultInputs() Inputs {
	return Inputs{PagesPerMonth: 100e6, PageKB: 100, Queues: 2, Spiders: 10, ItemBytes: 1000, RetentionMonths: 1,
		LogBytesPerPage: 100, Runtime: ECS}
}

// InputError names the Inputs field that is out of range.
type InputError struct {
	Field string // the Inputs field
	Msg   string
}

func (e *InputError) Error() string { return fmt.Sprintf("cost: %s %s", e.Field, e.Msg) }

// ErrInvalid is wrapped by every error Compute returns for inputs or a stack it cannot price.
var ErrInvalid = errors.New("cost: invalid input")

func (e *InputError) Unwrap() error { return ErrInvalid }

func inRange(field string, v, lo, hi float64) error {
	if math.IsNaN(v) || v < lo || v > hi {
		return &InputError{Field: field, Msg: fmt.Sprintf("%g out of range: want %g to %g", v, lo, hi)}
	}
	return nil
}

// Validate checks every field against the range the model is meant for.
func (in Inputs) Validate() error {
	return errors.Join(
		inRange("PagesPerMonth", in.PagesPerMonth, 1000, 1e12),
		inRange("PageKB", in.PageKB, 0.1, 100000),
		inRange("Queues", float64(in.Queues), 1, 1000),
		inRange("Spiders", float64(in.Spiders), 1, 100000),
		inRange("ItemBytes", in.ItemBytes, 0, 1e8),
		inRange("RetentionMonths", in.RetentionMonths, 0, 1200),
		inRange("LogBytesPerPage", in.LogBytesPerPage, 0, 1e7),
		func() error {
			if in.Runtime != ECS && in.Runtime != Lambda {
				return &InputError{Field: "Runtime", Msg: fmt.Sprintf("%q: want ecs or lambda", in.Runtime)}
			}
			return nil
		}(),
	)
}

func (s Stack) validate(rt Runtime) error {
	ok := false
	for _, r := range s.RuntimesSupported {
		ok = ok || r == rt
	}
	switch {
	case !ok:
		return &InputError{Field: "Runtime", Msg: fmt.Sprintf("%q: the %s stack crawls only on %v", rt, s.Name, s.RuntimesSupported)}
	case rt == ECS && (s.TaskVCPU <= 0 || s.TaskMemoryGB <= 0 || s.PagesPerSecondPerTask <= 0):
		return fmt.Errorf("%w: TaskVCPU, TaskMemoryGB and PagesPerSecondPerTask must be positive", ErrInvalid)
	case rt == Lambda && (s.WorkerMemoryGB <= 0 || s.PagesPerSecondPerWorker <= 0 || s.InvocationSeconds <= 0):
		return fmt.Errorf("%w: WorkerMemoryGB, PagesPerSecondPerWorker and InvocationSeconds must be positive", ErrInvalid)
	case s.Zones < 1 || s.NATGateways < 0 || s.NATGateways > s.Zones:
		return fmt.Errorf("%w: Zones %d, NATGateways %d: want 1+ zones and at most one NAT gateway each", ErrInvalid, s.Zones, s.NATGateways)
	case s.S3ItemsPerPut <= 0:
		return fmt.Errorf("%w: S3ItemsPerPut must be positive", ErrInvalid)
	}
	return nil
}

// Term is one line of the bill.
type Term struct {
	Name string
	// PerMillion is the cost that grows with pages, per million pages.
	PerMillion float64
	// FixedPerMonth is the cost that runs whether or not anything is crawled.
	FixedPerMonth float64
	// Basis is how the figure is made, quantities times prices.
	Basis string
}

// Estimate is a stack's bill for a workload.
type Estimate struct {
	Stack  Stack
	Inputs Inputs
	Terms  []Term
	// CustomMetrics is the number of crawlq's own CloudWatch metrics (without Container Insights').
	CustomMetrics int
	// ItemsGBPerMonth is how much item storage a month of crawling adds; ItemsGBKept is what the
	// retention keeps at steady state.
	ItemsGBPerMonth, ItemsGBKept float64
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

// PerMonth is the monthly bill at Inputs.PagesPerMonth.
func (e Estimate) PerMonth() float64 {
	return e.FixedPerMonth() + e.PerMillion()*e.Inputs.PagesPerMonth/1e6
}

// AllInPerMillion is PerMonth spread over the month's pages.
func (e Estimate) AllInPerMillion() float64 {
	return e.PerMonth() / (e.Inputs.PagesPerMonth / 1e6)
}

// PagesPerMonthFor is the monthly volume from which a million pages cost at most target all-in
// (fixed costs shared out), or +Inf when the per-page cost alone reaches target. Every other
// input stays as given (no term's price per page changes with volume in this model).
func (e Estimate) PagesPerMonthFor(target float64) float64 {
	v := e.PerMillion()
	if v >= target {
		return math.Inf(1)
	}
	return e.FixedPerMonth() / (target - v) * 1e6
}

// CustomMetrics counts the CloudWatch metrics crawlq writes, from internal/metrics' vocabulary:
// each queue metric per queue (dimension Queue), each spider metric per spider (Spider), and
// MonitorFailed per spider and monitor kind (Spider+Monitor) and per monitor kind (Monitor).
// Without per-spider dimensions the spider metrics are written once, as totals, and
// MonitorFailed only per monitor kind.
func CustomMetrics(queues, spiders int, perSpider bool) int {
	perQueue, perSpiderNames := len(metrics.QueueMetricNames()), len(metrics.SpiderMetricNames())
	monitors := len(metrics.MonitorMetricNames()) * defaultMonitorKinds
	if !perSpider {
		return perQueue*queues + perSpiderNames + monitors
	}
	return perQueue*queues + perSpiderNames*spiders + monitors*spiders + monitors
}

// Compute prices stack s for inputs in.
func Compute(s Stack, in Inputs) (Estimate, error) {
	if err := in.Validate(); err != nil {
		return Estimate{}, err
	}
	if err := s.validate(in.Runtime); err != nil {
		return Estimate{}, err
	}
	const pages = 1e6 // every per-page term is for a million pages
	gbOf := func(bytesPerPage float64) float64 { return bytesPerPage * pages / 1e9 }
	pageBytes := in.PageKB * 1000
	outBytes := RequestBytesPerPage + pageBytes/SegmentPairBytes*ACKBytesPerSegmentPair
	cross := float64(s.Zones-1) / float64(s.Zones) // share of traffic between two random zones' ends that crosses
	var terms []Term
	add := func(name string, perMillion, fixed float64, basis string, a ...any) {
		terms = append(terms, Term{Name: name, PerMillion: perMillion, FixedPerMonth: fixed, Basis: fmt.Sprintf(basis, a...)})
	}

	// Crawling.
	itemsToS3 := in.Runtime == Lambda || s.ItemsToS3ForECS
	switch in.Runtime {
	case ECS:
		hours := pages / s.PagesPerSecondPerTask / 3600
		rate := s.TaskVCPU*FargateVCPUHour + s.TaskMemoryGB*FargateGBHour
		kind := "Fargate"
		if s.Spot {
			rate *= 1 - FargateSpotDiscount
			kind = "Fargate Spot"
		}
		add(kind+" runners", hours*rate, 0, "%.3f task-h (%g pages/s) x $%.6f/h (%g vCPU, %g GB)", hours, s.PagesPerSecondPerTask, rate, s.TaskVCPU, s.TaskMemoryGB)
		add("runner public IPv4", hours*PublicIPv4Hour, 0, "%.3f task-h x $%.3f/h", hours, PublicIPv4Hour)
		add("outbound traffic (requests, ACKs, TLS)", gbOf(outBytes)*InternetOutPerGB, 0, "%.0f B/page = %.3f GB x $%.2f/GB out", outBytes, gbOf(outBytes), InternetOutPerGB)
		add("fetched bytes through NAT", 0, 0, "runners fetch through the internet gateway: inbound free")
	case Lambda:
		secs := pages / s.PagesPerSecondPerWorker
		add("worker Lambdas", secs*s.WorkerMemoryGB*LambdaGBSecondArm+secs/s.InvocationSeconds*LambdaRequest, 0,
			"%.0f s (%g pages/s) x %g GB x $%.10f + %.0f invocations x $%.1f/M", secs, s.PagesPerSecondPerWorker, s.WorkerMemoryGB, LambdaGBSecondArm, secs/s.InvocationSeconds, LambdaRequest*1e6)
		add("outbound traffic (requests, ACKs, TLS)", gbOf(outBytes)*InternetOutPerGB, 0, "%.0f B/page = %.3f GB x $%.2f/GB out", outBytes, gbOf(outBytes), InternetOutPerGB)
		natGB := gbOf(pageBytes + outBytes)
		crossNAT := 0.0
		if s.NATGateways > 0 && s.NATGateways < s.Zones {
			crossNAT = float64(s.Zones-s.NATGateways) / float64(s.Zones)
		}
		add("fetched bytes through NAT", natGB*NATPerGB+natGB*crossNAT*CrossAZPerGB, 0,
			"%.3f GB in+out x $%.3f processing + %.0f%% of it cross-zone to the NAT x $%.2f", natGB, NATPerGB, crossNAT*100, CrossAZPerGB)
	}
	// Database traffic crosses zones on each hop whose two ends are in different zones: clients
	// to the proxy (spread over every zone) and the proxy to the single-AZ instance; without a
	// proxy, clients to the instance. Items travel to Postgres unless they go to S3.
	dbBytes := float64(DBWireBytesPerPage)
	if !itemsToS3 {
		dbBytes += in.ItemBytes
	}
	hops, target := 1.0, "instance"
	if s.Proxy {
		hops, target = 2, "proxy and instance"
	}
	add("cross-AZ to the database", gbOf(dbBytes)*cross*hops*CrossAZPerGB, 0,
		"%.0f B/page = %.3f GB x %.0f hop(s) (to the %s) x %.0f%% crossing x $%.2f/GB", dbBytes, gbOf(dbBytes), hops, target, cross*100, CrossAZPerGB)
	logGB := gbOf(in.LogBytesPerPage)
	logMonths := s.LogRetentionDays / DaysPerMonth
	add("logs per page", logGB*LogsIngestPerGB+logGB*LogsStoreGBMonth*logMonths, 0,
		"%.3f GB x ($%.2f ingest + %.3f months x $%.2f stored)", logGB, LogsIngestPerGB, logMonths, LogsStoreGBMonth)
	itemsGB := gbOf(in.ItemBytes)
	if itemsToS3 {
		puts := pages / s.S3ItemsPerPut
		add("items in S3", itemsGB*in.RetentionMonths*S3GBMonth+puts/1000*S3PutPer1000, 0,
			"%.3f GB x %g months x $%.3f + %.0f PUTs x $%.3f/1000", itemsGB, in.RetentionMonths, S3GBMonth, puts, S3PutPer1000)
	} else {
		add("items in Postgres", itemsGB*in.RetentionMonths*RDSGp3GBMonth, 0,
			"%.3f GB x %g months kept x $%.3f/GB-month gp3", itemsGB, in.RetentionMonths, RDSGp3GBMonth)
	}

	// Standing costs.
	if s.NATInstance {
		add("NAT instance (t4g.nano)", 0, T4gNanoHour*HoursPerMonth+NATVolumeGB*EBSGp3GBMonth, "730 h x $%.4f + %d GB gp3 x $%.2f", T4gNanoHour, NATVolumeGB, EBSGp3GBMonth)
		add("NAT public IPv4", 0, PublicIPv4Hour*HoursPerMonth, "1 address x 730 h x $%.3f", PublicIPv4Hour)
	} else {
		add("NAT gateway", 0, float64(s.NATGateways)*NATHour*HoursPerMonth, "%d x 730 h x $%.3f", s.NATGateways, NATHour)
		add("NAT public IPv4", 0, float64(s.NATGateways)*PublicIPv4Hour*HoursPerMonth, "%d address(es) x 730 h x $%.3f", s.NATGateways, PublicIPv4Hour)
	}
	instances := 1.0
	if s.MultiAZ {
		instances = 2
	}
	add("RDS instance", 0, instances*s.DBHour*HoursPerMonth, "%g x %s, 730 h x $%.3f", instances, s.DBClass, s.DBHour)
	add("RDS storage", 0, instances*s.DBStorageGB*RDSGp3GBMonth, "%g x %g GB gp3 allocated x $%.3f", instances, s.DBStorageGB, RDSGp3GBMonth)
	if s.Proxy {
		v := max(s.DBVCPU, 2)
		add("RDS Proxy", 0, float64(v)*RDSProxyVCPUHour*HoursPerMonth, "%d vCPU x 730 h x $%.3f", v, RDSProxyVCPUHour)
	} else {
		add("RDS Proxy", 0, 0, "none: clients connect to the instance")
	}
	n := CustomMetrics(in.Queues, in.Spiders, s.PerSpiderMetrics)
	perQueue, perSpider := len(metrics.QueueMetricNames()), len(metrics.SpiderMetricNames())
	monitors := len(metrics.MonitorMetricNames()) * defaultMonitorKinds
	if s.PerSpiderMetrics {
		add("CloudWatch metrics (crawlq)", 0, float64(n)*MetricMonth, "%d = %d x %d queues + %d x %d spiders + %d monitors x (%d spiders + 1), x $%.2f",
			n, perQueue, in.Queues, perSpider, in.Spiders, monitors, in.Spiders, MetricMonth)
	} else {
		add("CloudWatch metrics (crawlq)", 0, float64(n)*MetricMonth, "%d = %d x %d queues + %d spider totals + %d monitors, x $%.2f",
			n, perQueue, in.Queues, perSpider, monitors, MetricMonth)
	}
	add("Container Insights metrics", 0, float64(s.InsightsMetrics)*MetricMonth, "%d x $%.2f", s.InsightsMetrics, MetricMonth)
	add("CloudWatch dashboard", 0, float64(s.Dashboards)*DashboardMonth, "%d x $%.2f", s.Dashboards, DashboardMonth)
	add("CloudWatch alarms", 0, float64(s.StandardAlarms)*AlarmMonth+float64(s.InsightsAlarms*in.Queues)*InsightsAlarmMonth,
		"%d standard x $%.2f + %d Metrics Insights x %d queues x $%.2f", s.StandardAlarms, AlarmMonth, s.InsightsAlarms, in.Queues, InsightsAlarmMonth)
	tickLogGB := (TicksPerMonth*TickLogBytes + float64(in.Queues+in.Spiders)*60*HoursPerMonth*EMFLineBytes) / 1e9
	add("logs of the minute ticks", 0, tickLogGB*LogsIngestPerGB, "%.3f GB (Lambda lines + %d EMF lines a minute) x $%.2f", tickLogGB, in.Queues+in.Spiders, LogsIngestPerGB)
	add("minute ticks (Lambda + Scheduler)", 0, TicksPerMonth*(TickSeconds*TickMemoryGB*LambdaGBSecondArm+LambdaRequest+SchedulerInvocation),
		"%.0f invocations x (%g s x %g GB x $%.10f + $%.1f/M + $%.1f/M)", TicksPerMonth, TickSeconds, TickMemoryGB, LambdaGBSecondArm, LambdaRequest*1e6, SchedulerInvocation*1e6)
	add("KMS", 0, float64(s.KMSKeys)*KMSKeyMonth+KMSRequestsMonth*KMSPerReq, "%d key x $%.2f + %d requests x $%.2f/10k", s.KMSKeys, KMSKeyMonth, KMSRequestsMonth, KMSPerReq*1e4)
	add("Secrets Manager", 0, float64(s.Secrets)*SecretMonth+SecretCallsMonth*SecretPerReq, "%d secrets x $%.2f + %d calls x $%.2f/10k", s.Secrets, SecretMonth, SecretCallsMonth, SecretPerReq*1e4)
	add("ECR images", 0, ECRStoredGB*ECRGBMonth, "%g GB x $%.2f", ECRStoredGB, ECRGBMonth)

	return Estimate{Stack: s, Inputs: in, Terms: terms, CustomMetrics: n,
		ItemsGBPerMonth: in.ItemBytes * in.PagesPerMonth / 1e9, ItemsGBKept: in.ItemBytes * in.PagesPerMonth / 1e9 * in.RetentionMonths}, nil
}
