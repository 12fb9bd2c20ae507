package lambdafn

import (
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"crawlq/internal/runlog"
)

// RunLog is where run logs live: one stream per run in the CloudWatch Logs group
// Config.RunLogGroup (the AWS stack sets CRAWLQ_RUN_LOG_GROUP for every function and runner, so
// writers and readers agree), else the crawlq_run_log table.
func (d *Deps) RunLog() runlog.Store {
	if g := d.Config.RunLogGroup; g != "" {
		return runlog.CloudWatch{Client: cloudwatchlogs.NewFromConfig(d.AWS), Group: g}
	}
	return runlog.Postgres{Pool: d.Pool}
}
