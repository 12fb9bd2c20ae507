package envconfig

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"crawlq/internal/ecsrun"
)

// ECSLauncher builds the dispatch function's runner launcher from CRAWLQ_ECS_CLUSTER,
// CRAWLQ_ECS_TASK_DEFINITION, CRAWLQ_ECS_SUBNETS and CRAWLQ_ECS_SECURITY_GROUPS
// (comma-separated), CRAWLQ_ECS_MAX_TASKS (default 10), CRAWLQ_ECS_CONTAINER (default "runner"),
// CRAWLQ_ECS_ASSIGN_PUBLIC_IP (true/false), CRAWLQ_ECS_CAPACITY_PROVIDER,
// CRAWLQ_ECS_FALLBACK_PROVIDER, and the runner overrides CRAWLQ_ECS_QUEUE,
// CRAWLQ_ECS_RUNNER_CONCURRENCY, CRAWLQ_ECS_RUNNER_MAX_JOBS, CRAWLQ_ECS_RUNNER_MAX_MEMORY_MIB.
// Errors are ecsrun.ErrConfig.
func ECSLauncher(env Env, client *ecs.Client) (*ecsrun.Launcher, error) {
	l := &ecsrun.Launcher{
		Client: client, Cluster: env.String("CRAWLQ_ECS_CLUSTER"), TaskDefinition: env.String("CRAWLQ_ECS_TASK_DEFINITION"),
		Container: env.String("CRAWLQ_ECS_CONTAINER"), Subnets: env.List("CRAWLQ_ECS_SUBNETS"),
		SecurityGroups: env.List("CRAWLQ_ECS_SECURITY_GROUPS"), CapacityProvider: env.String("CRAWLQ_ECS_CAPACITY_PROVIDER"),
		FallbackProvider: env.String("CRAWLQ_ECS_FALLBACK_PROVIDER"), Queue: env.String("CRAWLQ_ECS_QUEUE"),
	}
	var err error
	bad := func(err error) (*ecsrun.Launcher, error) { return nil, fmt.Errorf("%w: %w", ecsrun.ErrConfig, err) }
	if l.Max, err = env.Int("CRAWLQ_ECS_MAX_TASKS", 0); err != nil {
		return bad(err)
	}
	if l.Concurrency, err = env.Int("CRAWLQ_ECS_RUNNER_CONCURRENCY", 0); err != nil {
		return bad(err)
	}
	if l.MaxJobs, err = env.Int("CRAWLQ_ECS_RUNNER_MAX_JOBS", 0); err != nil {
		return bad(err)
	}
	if l.MaxMemoryMiB, err = env.Int("CRAWLQ_ECS_RUNNER_MAX_MEMORY_MIB", 0); err != nil {
		return bad(err)
	}
	if l.AssignPublicIP, err = env.Bool("CRAWLQ_ECS_ASSIGN_PUBLIC_IP", false); err != nil {
		return bad(err)
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return l, nil
}
