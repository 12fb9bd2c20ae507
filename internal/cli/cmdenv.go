package cli

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"crawlq/internal/db"
	"crawlq/internal/envconfig"
)

// The short-lived commands that read a variable of their own read it, like the long-running ones
// (procenv.go), once at their start into a struct, checked before they connect: a bad value is a
// usage error naming its variable.

// schedulesEnv is what crawlq schedules reads from its environment beside the database.
type schedulesEnv struct {
	// Group is CRAWLQ_SCHEDULE_GROUP, the group the api keeps schedules in (as crawlq local reads
	// it). Default "crawlq".
	Group string
}

// scheduleGroupName is what EventBridge Scheduler takes as a group name.
var scheduleGroupName = regexp.MustCompile(`^[0-9A-Za-z._-]{1,64}$`)

// readSchedulesEnv reads crawlq schedules' environment.
func readSchedulesEnv(env *Env) (schedulesEnv, error) {
	g := envconfig.New(env.Getenv).StringOr("CRAWLQ_SCHEDULE_GROUP", "crawlq")
	if !scheduleGroupName.MatchString(g) {
		return schedulesEnv{}, usageErr("%v", envconfig.Errorf("CRAWLQ_SCHEDULE_GROUP", "not a schedule group name (1-64 of A-Z a-z 0-9 . _ -): %q", g))
	}
	return schedulesEnv{Group: g}, nil
}

// logsEnv is what crawlq logs reads from its environment beside the database.
type logsEnv struct {
	// RunLogGroup is CRAWLQ_RUN_LOG_GROUP: the CloudWatch Logs group the runs' logs are in;
	// empty: the crawlq_run_log table.
	RunLogGroup string
}

// logGroupName is what CloudWatch Logs takes as a log group name.
var logGroupName = regexp.MustCompile(`^[.\-_/#A-Za-z0-9]{1,512}$`)

// readLogsEnv reads crawlq logs' environment.
func readLogsEnv(env *Env) (logsEnv, error) {
	g := envconfig.New(env.Getenv).String("CRAWLQ_RUN_LOG_GROUP")
	if g != "" && !logGroupName.MatchString(g) {
		return logsEnv{}, usageErr("%v", envconfig.Errorf("CRAWLQ_RUN_LOG_GROUP", "not a log group name (1-512 of A-Z a-z 0-9 . _ - / #): %q", g))
	}
	return logsEnv{RunLogGroup: g}, nil
}

// awsEnv are the AWS variables crawlq documents, read by a command that calls AWS itself (the api
// function, the dispatch function's poke); the SDK's own chain (shared files, SSO, instance role)
// supplies the rest.
type awsEnv struct {
	// Region is AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1.
	Region string
	// Endpoint is AWS_ENDPOINT_URL: crawlq local or an emulator; empty: AWS.
	Endpoint string
	// AccessKeyID, SecretAccessKey and SessionToken are AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
	// and AWS_SESSION_TOKEN: static credentials; empty: the SDK's chain.
	AccessKeyID, SecretAccessKey, SessionToken string
}

// awsRegion is the shape of an AWS region's name.
var awsRegion = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// readAWSEnv reads and checks the AWS variables.
func readAWSEnv(env *Env) (awsEnv, error) {
	e := envconfig.New(env.Getenv)
	a := awsEnv{Endpoint: e.String("AWS_ENDPOINT_URL"), AccessKeyID: e.String("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: e.String("AWS_SECRET_ACCESS_KEY"), SessionToken: e.String("AWS_SESSION_TOKEN")}
	regionVar := "AWS_REGION"
	if a.Region = e.String("AWS_REGION"); a.Region == "" {
		regionVar, a.Region = "AWS_DEFAULT_REGION", e.StringOr("AWS_DEFAULT_REGION", "us-east-1")
	}
	if !awsRegion.MatchString(a.Region) {
		return awsEnv{}, usageErr("%v", envconfig.Errorf(regionVar, "not a region name (e.g. us-east-1): %q", a.Region))
	}
	if err := checkEndpoint(a.Endpoint); err != nil {
		return awsEnv{}, err
	}
	switch {
	case a.AccessKeyID != "" && a.SecretAccessKey == "":
		return awsEnv{}, usageErr("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY")
	case a.AccessKeyID == "" && a.SecretAccessKey != "":
		return awsEnv{}, usageErr("AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID")
	}
	return a, nil
}

// config is the SDK configuration a's variables say, the SDK's chain filling the rest.
func (a awsEnv) config(ctx context.Context) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithRegion(a.Region)}
	if a.Endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(a.Endpoint))
	}
	if a.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(a.AccessKeyID, a.SecretAccessKey, a.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	return cfg, nil
}

// remoteEnv is what a command going through the api function (--api, CRAWLQ_API) reads from its
// environment: the function and the AWS variables.
type remoteEnv struct {
	// Function is --api, else CRAWLQ_API: the api function's name or ARN.
	Function string
	AWS      awsEnv
}

// lambdaFunction is what Lambda's Invoke takes as a function: a name, a partial or full ARN, with
// an optional version or alias.
var lambdaFunction = regexp.MustCompile(`^(arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:|\d{12}:function:)?[a-zA-Z0-9_-]{1,140}(:(\$LATEST|[a-zA-Z0-9_-]+))?$`)

// readRemoteEnv reads a remote command's environment; fn is the api function and source where
// it came from (--api, or CRAWLQ_API as apiFunction read it).
func readRemoteEnv(env *Env, fn, source string) (remoteEnv, error) {
	if !lambdaFunction.MatchString(fn) {
		return remoteEnv{}, usageErr("%v", envconfig.Errorf(source, "not a Lambda function name or ARN: %q", fn))
	}
	a, err := readAWSEnv(env)
	if err != nil {
		return remoteEnv{}, err
	}
	return remoteEnv{Function: fn, AWS: a}, nil
}

// checkEndpoint checks AWS_ENDPOINT_URL's value: empty (AWS) or an http(s) URL with a host.
func checkEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr("%v", envconfig.Errorf("AWS_ENDPOINT_URL", "not an http(s) URL with a host: %q", endpoint))
	}
	return nil
}

// wakeEnv is what a command that wakes the dispatcher after a change (wakeDispatch) reads from its
// environment beside the database.
type wakeEnv struct {
	// DispatchFunction is CRAWLQ_DISPATCH_FUNCTION: the deployed dispatch function to poke;
	// empty: none (a crawlq local on the database hears the NOTIFY).
	DispatchFunction string
	// AWS are the AWS variables the poke is sent with, read when DispatchFunction is set.
	AWS awsEnv
}

// readWakeEnv reads the environment of a command that wakes the dispatcher.
func readWakeEnv(env *Env) (wakeEnv, error) {
	fn := envconfig.New(env.Getenv).String("CRAWLQ_DISPATCH_FUNCTION")
	if fn != "" && !lambdaFunction.MatchString(fn) {
		return wakeEnv{}, usageErr("%v", envconfig.Errorf("CRAWLQ_DISPATCH_FUNCTION", "not a Lambda function name or ARN: %q", fn))
	}
	w := wakeEnv{DispatchFunction: fn}
	if fn != "" {
		var err error
		if w.AWS, err = readAWSEnv(env); err != nil {
			return wakeEnv{}, err
		}
	}
	return w, nil
}

// benchEnv is what crawlq bench reads from its environment.
type benchEnv struct {
	// URL is --database-url, else DATABASE_URL: the bench opens its pools from a URL (a schema
	// of its own on each), so the CRAWLQ_DB_* addressing does not apply.
	URL string
	// ExecMode is CRAWLQ_DB_EXEC_MODE (db.Config.ExecMode) as pgx names it in a URL
	// (default_query_exec_mode); empty: the URL's.
	ExecMode string
}

// readBenchEnv reads crawlq bench's environment; flagURL is --database-url's value.
func readBenchEnv(env *Env, flagURL string) (benchEnv, error) {
	e := envconfig.New(env.Getenv)
	b := benchEnv{URL: flagURL, ExecMode: e.String("CRAWLQ_DB_EXEC_MODE")}
	if b.URL == "" {
		b.URL = e.String("DATABASE_URL")
	}
	switch {
	case b.URL == "":
		return benchEnv{}, usageErr("set DATABASE_URL or --database-url")
	case !db.ValidExecMode(b.ExecMode):
		// An error, not a usage one, as every other command's bad CRAWLQ_DB_EXEC_MODE is.
		return benchEnv{}, envconfig.Errorf("CRAWLQ_DB_EXEC_MODE", "not exec, simple, cache_describe or cache_statement: %q", b.ExecMode)
	case b.ExecMode != "" && strings.Contains(b.URL, "default_query_exec_mode="):
		return benchEnv{}, usageErr("CRAWLQ_DB_EXEC_MODE and default_query_exec_mode in the database URL: set one")
	}
	if b.ExecMode == "simple" { // pgx's name for it in a URL
		b.ExecMode = "simple_protocol"
	}
	return b, nil
}

// deployEnv is what crawlq deploy, plan and destroy read from their environment.
type deployEnv struct {
	// Environ is the whole environment terraform starts from (deploy.Config.Base): its TF_VAR_*
	// are Terraform variables (deploy's alarm_email check reads them there too).
	Environ []string
	// TFConfigFile is TF_CLI_CONFIG_FILE; empty: scripts/tfrc.sh's provider mirror, when the
	// repository has one.
	TFConfigFile string
	// Endpoint is AWS_ENDPOINT_URL: an emulator (the stack's providers point at it); empty: AWS.
	Endpoint string
	// DatabaseURL is DATABASE_URL: deploy also migrates that database; empty: only the stack's.
	DatabaseURL string
	// Database are the database variables (CRAWLQ_DB_EXEC_MODE beside DATABASE_URL), read when
	// DatabaseURL is set.
	Database envconfig.DBVars
}

// readDeployEnv reads the environment of crawlq deploy, plan and destroy.
func readDeployEnv(env *Env) (deployEnv, error) {
	e := envconfig.New(env.Getenv)
	d := deployEnv{Environ: env.environ(), TFConfigFile: e.String("TF_CLI_CONFIG_FILE"), Endpoint: e.String("AWS_ENDPOINT_URL"), DatabaseURL: e.String("DATABASE_URL")}
	if err := checkEndpoint(d.Endpoint); err != nil {
		return deployEnv{}, err
	}
	if d.DatabaseURL != "" {
		var err error
		if d.Database, err = envconfig.ReadDB(e, commandMaxConns); err != nil {
			return deployEnv{}, err
		}
	}
	return d, nil
}
