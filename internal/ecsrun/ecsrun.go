// Package ecsrun starts ECS runner tasks (crawlq runner) on Fargate with RunTask. It owns the
// contract between the dispatcher and the runner container: which RunTask call is made (Fargate
// capacity providers, Spot first; awsvpc networking; at most 10 tasks per call) and which
// environment overrides tell a runner its queue and limits (the Env* names, read by
// `crawlq runner`). It does not decide how many runners are wanted: the dispatcher does, from
// the queue's counts and the live runners registered in Postgres (see Needed).
package ecsrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"crawlq/internal/queue"
)

// Environment overrides a launched runner reads (`crawlq runner` flags default to them).
const (
	EnvQueue       = "CRAWLQ_QUEUE"          // queue to work
	EnvConcurrency = "CRAWLQ_CONCURRENCY"    // jobs at once
	EnvMaxJobs     = "CRAWLQ_MAX_JOBS"       // recycle after this many jobs
	EnvMaxMemory   = "CRAWLQ_MAX_MEMORY_MIB" // recycle past this resident memory, MiB
	EnvStopGrace   = "CRAWLQ_STOP_GRACE"     // Go duration: grace after SIGTERM
)

// MaxPerCall is the most tasks one RunTask call may start.
const MaxPerCall = 10

// Errors callers branch on.
var (
	// ErrConfig: the launcher's configuration is incomplete or wrong; nothing was called.
	ErrConfig = errors.New("ecsrun: bad configuration")
	// ErrTaskDefinition: the task definition cannot run on Fargate Spot (see Check).
	ErrTaskDefinition = errors.New("ecsrun: unsuitable task definition")
	// ErrNotStarted: ECS refused to start some tasks (its failures are in the message).
	ErrNotStarted = errors.New("ecsrun: tasks not started")
)

// Launcher starts runner tasks. Fill it in (envconfig.ECSLauncher reads it from the dispatch
// function's environment), check it with Validate, then call Launch.
type Launcher struct {
	// Client talks to ECS. Required.
	Client *ecs.Client
	// Cluster name or ARN. Required.
	Cluster string
	// TaskDefinition is family[:revision] or ARN; its runtime platform must be X86_64 (Fargate
	// Spot has no ARM64 capacity) and it must be Fargate compatible. Required.
	TaskDefinition string
	// Container is the runner container's name in the task definition. Default "runner".
	Container string
	// Subnets for the tasks' network interfaces (awsvpc). At least one required.
	Subnets []string
	// SecurityGroups for the tasks. Default none (the VPC's default group).
	SecurityGroups []string
	// AssignPublicIP gives tasks a public IP (public subnets without a NAT gateway). Default false.
	AssignPublicIP bool
	// Max is the most runners that may live at once; Launch never starts more in one call, and
	// Needed never asks for more than Max minus the live ones. Default 10.
	Max int
	// CapacityProvider tasks are started on first. Default "FARGATE_SPOT".
	CapacityProvider string
	// FallbackProvider starts the tasks CapacityProvider had no capacity for. Default "FARGATE";
	// "none" disables the fallback.
	FallbackProvider string
	// Queue the runners work (EnvQueue). Default "long".
	Queue string
	// Concurrency, MaxJobs, MaxMemoryMiB and StopGrace are passed to the runners as overrides
	// (EnvConcurrency, EnvMaxJobs, EnvMaxMemory, EnvStopGrace). Zero: the runner's default.
	Concurrency  int
	MaxJobs      int
	MaxMemoryMiB int
	StopGrace    time.Duration
	// StartedBy tags the tasks (ListTasks can filter on it). Default "crawlq-dispatch".
	StartedBy string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (l *Launcher) withDefaults() Launcher {
	c := *l
	if c.Container == "" {
		c.Container = "runner"
	}
	if c.Max == 0 {
		c.Max = 10
	}
	if c.CapacityProvider == "" {
		c.CapacityProvider = "FARGATE_SPOT"
	}
	if c.FallbackProvider == "" {
		c.FallbackProvider = "FARGATE"
	}
	if c.FallbackProvider == "none" || c.FallbackProvider == c.CapacityProvider {
		c.FallbackProvider = ""
	}
	if c.Queue == "" {
		c.Queue = "long"
	}
	if c.StartedBy == "" {
		c.StartedBy = "crawlq-dispatch"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate returns an ErrConfig naming the first missing or bad field.
func (l *Launcher) Validate() error {
	c := l.withDefaults()
	bad := func(format string, a ...any) error { return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...)) }
	switch {
	case c.Client == nil:
		return bad("Client is required")
	case c.Cluster == "":
		return bad("Cluster (CRAWLQ_ECS_CLUSTER) is required")
	case c.TaskDefinition == "":
		return bad("TaskDefinition (CRAWLQ_ECS_TASK_DEFINITION) is required")
	case len(c.Subnets) == 0:
		return bad("Subnets (CRAWLQ_ECS_SUBNETS) needs at least one subnet")
	case len(c.Subnets) > 16:
		return bad("Subnets has %d entries, at most 16 allowed", len(c.Subnets))
	case len(c.SecurityGroups) > 5:
		return bad("SecurityGroups has %d entries, at most 5 allowed", len(c.SecurityGroups))
	case c.Max < 0:
		return bad("Max (CRAWLQ_ECS_MAX_TASKS) %d is negative", c.Max)
	case c.Concurrency < 0 || c.MaxJobs < 0 || c.MaxMemoryMiB < 0 || c.StopGrace < 0:
		return bad("Concurrency, MaxJobs, MaxMemoryMiB and StopGrace must not be negative")
	case len(c.StartedBy) > 36:
		return bad("StartedBy %q is longer than 36 characters", c.StartedBy)
	}
	if err := queue.ValidateQueue(c.Queue); err != nil {
		return bad("Queue: %v", err)
	}
	return nil
}

// Needed returns how many runners to start: enough that every waiting or running job of the
// queue has a slot (perRunner jobs each, the runners' concurrency), less the live runners and
// those started but not yet registered (starting), within Max. perRunner 0 means 6, the
// runner's default concurrency.
func (l *Launcher) Needed(st queue.QueueStats, live, starting int) int {
	c := l.withDefaults()
	if perRunner := c.Concurrency; perRunner > 0 {
		return needed(st, live+starting, perRunner, c.Max)
	}
	return needed(st, live+starting, 6, c.Max)
}

func needed(st queue.QueueStats, have, perRunner, max int) int {
	// Delayed jobs not yet due need no runner yet; the dispatcher's next tick sees them.
	jobs := st.Available + st.Running
	want := int((jobs + int64(perRunner) - 1) / int64(perRunner))
	return max0(min(want, max) - have)
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

// Check verifies that the task definition can run as a runner on Fargate Spot: Fargate
// compatible, awsvpc networking, an X86_64 runtime platform (or none, which means X86_64), and a
// container named Container.
func (l *Launcher) Check(ctx context.Context) error {
	if err := l.Validate(); err != nil {
		return err
	}
	c := l.withDefaults()
	out, err := c.Client.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(c.TaskDefinition)})
	if err != nil {
		return fmt.Errorf("describe task definition %s: %w", c.TaskDefinition, err)
	}
	td := out.TaskDefinition
	var problems []string
	fargate := false
	for _, comp := range td.RequiresCompatibilities {
		fargate = fargate || comp == types.CompatibilityFargate
	}
	if !fargate {
		problems = append(problems, "requiresCompatibilities lacks FARGATE")
	}
	if td.NetworkMode != types.NetworkModeAwsvpc {
		problems = append(problems, fmt.Sprintf("networkMode is %q, Fargate needs awsvpc", td.NetworkMode))
	}
	if rp := td.RuntimePlatform; rp != nil && rp.CpuArchitecture != "" && rp.CpuArchitecture != types.CPUArchitectureX8664 {
		problems = append(problems, fmt.Sprintf("cpuArchitecture is %s; Fargate Spot needs X86_64", rp.CpuArchitecture))
	}
	found := false
	for _, cd := range td.ContainerDefinitions {
		found = found || aws.ToString(cd.Name) == c.Container
	}
	if !found {
		problems = append(problems, fmt.Sprintf("no container named %q", c.Container))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrTaskDefinition, c.TaskDefinition, strings.Join(problems, "; "))
	}
	return nil
}

// Launch starts n runner tasks (never more than n, nor more than Max) in RunTask calls of at
// most MaxPerCall, on CapacityProvider first and, for tasks it had no capacity for, on
// FallbackProvider. It returns how many started; when that is fewer than asked, err says why
// (wrapping ErrNotStarted with ECS's failure reasons, or the API error).
func (l *Launcher) Launch(ctx context.Context, n int) (int, error) {
	if err := l.Validate(); err != nil {
		return 0, err
	}
	c := l.withDefaults()
	n = min(n, c.Max)
	started := 0
	providers := []string{c.CapacityProvider}
	if c.FallbackProvider != "" {
		providers = append(providers, c.FallbackProvider)
	}
	var lastErr error
	for i, provider := range providers {
		short := false // ECS lacked capacity on this provider: worth trying the next
		for started < n {
			count := min(n-started, MaxPerCall)
			in, err := c.Input(provider, count)
			if err != nil {
				return started, err
			}
			out, err := c.Client.RunTask(ctx, in)
			if err != nil {
				return started, fmt.Errorf("run task (%s, %d): %w", provider, count, err)
			}
			started += len(out.Tasks)
			c.Logger.Info("started runner tasks", "provider", provider, "asked", count, "started", len(out.Tasks),
				"failures", len(out.Failures), "cluster", c.Cluster)
			if len(out.Tasks) < count {
				lastErr = fmt.Errorf("%w: %d of %d on %s: %s", ErrNotStarted, count-len(out.Tasks), count, provider,
					failureReasons(out.Failures))
				short = capacityShort(out.Failures)
				break
			}
		}
		if started >= n || !short || i == len(providers)-1 {
			break
		}
		c.Logger.Warn("falling back to another capacity provider", "from", provider, "to", providers[i+1], "reason", lastErr)
	}
	if started < n {
		if lastErr == nil {
			lastErr = fmt.Errorf("%w: %d of %d", ErrNotStarted, n-started, n)
		}
		return started, lastErr
	}
	return started, nil
}

// capacityShort reports whether ECS refused tasks for want of capacity (worth another provider).
func capacityShort(fs []types.Failure) bool {
	for _, f := range fs {
		r := strings.ToLower(aws.ToString(f.Reason) + " " + aws.ToString(f.Detail))
		if strings.Contains(r, "capacity") || strings.Contains(r, "resource") {
			return true
		}
	}
	return false
}

func failureReasons(fs []types.Failure) string {
	if len(fs) == 0 {
		return "no reason given"
	}
	var parts []string
	for _, f := range fs {
		p := aws.ToString(f.Reason)
		if d := aws.ToString(f.Detail); d != "" {
			p += " (" + d + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// Input builds the RunTask call for count tasks on provider; Launch sends it. Exposed so the
// call can be checked without ECS.
func (l *Launcher) Input(provider string, count int) (*ecs.RunTaskInput, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if count < 1 || count > MaxPerCall {
		return nil, fmt.Errorf("%w: count %d is not in 1..%d", ErrConfig, count, MaxPerCall)
	}
	c := l.withDefaults()
	assign := types.AssignPublicIpDisabled
	if c.AssignPublicIP {
		assign = types.AssignPublicIpEnabled
	}
	env := []types.KeyValuePair{{Name: aws.String(EnvQueue), Value: aws.String(c.Queue)}}
	add := func(name string, v int) {
		if v > 0 {
			env = append(env, types.KeyValuePair{Name: aws.String(name), Value: aws.String(strconv.Itoa(v))})
		}
	}
	add(EnvConcurrency, c.Concurrency)
	add(EnvMaxJobs, c.MaxJobs)
	add(EnvMaxMemory, c.MaxMemoryMiB)
	if c.StopGrace > 0 {
		env = append(env, types.KeyValuePair{Name: aws.String(EnvStopGrace), Value: aws.String(c.StopGrace.String())})
	}
	// A fresh token per call: the SDK's own retries of this call then cannot start it twice.
	var tok [16]byte
	rand.Read(tok[:])
	return &ecs.RunTaskInput{
		Cluster:                  aws.String(c.Cluster),
		TaskDefinition:           aws.String(c.TaskDefinition),
		Count:                    aws.Int32(int32(count)),
		CapacityProviderStrategy: []types.CapacityProviderStrategyItem{{CapacityProvider: aws.String(provider), Weight: 1}},
		NetworkConfiguration: &types.NetworkConfiguration{AwsvpcConfiguration: &types.AwsVpcConfiguration{
			Subnets: c.Subnets, SecurityGroups: c.SecurityGroups, AssignPublicIp: assign,
		}},
		Overrides: &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{{
			Name: aws.String(c.Container), Environment: env,
		}}},
		StartedBy:   aws.String(c.StartedBy),
		ClientToken: aws.String(hex.EncodeToString(tok[:])),
	}, nil
}

// Tick is one dispatch step for the runners: it reads the queue's counts and the live runners
// (workers of kind "ecs" that heartbeated within horizon, default 2m) from Postgres, and launches what
// Needed says (starting: tasks launched recently that have not registered yet). It returns
// how many it started.
func (l *Launcher) Tick(ctx context.Context, qc *queue.Client, horizon time.Duration, starting int) (int, error) {
	c := l.withDefaults()
	if horizon <= 0 {
		horizon = 2 * time.Minute
	}
	stats, err := qc.Stats(ctx)
	if err != nil {
		return 0, fmt.Errorf("read queue stats: %w", err)
	}
	var st queue.QueueStats
	for _, s := range stats {
		if s.Queue == c.Queue {
			st = s
		}
	}
	live, err := qc.LiveWorkers(ctx, c.Queue, horizon)
	if err != nil {
		return 0, fmt.Errorf("count live runners: %w", err)
	}
	n := l.Needed(st, live[c.Queue]["ecs"], starting)
	if n == 0 {
		return 0, nil
	}
	return l.Launch(ctx, n)
}
