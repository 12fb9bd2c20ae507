package cli

import (
	"regexp"

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
