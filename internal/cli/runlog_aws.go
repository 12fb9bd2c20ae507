package cli

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"crawlq/internal/awsx"
	"crawlq/internal/runlog"
)

// cloudWatchLog is the CloudWatch Logs run log of group (the AWS stack's runners write there).
func cloudWatchLog(ctx context.Context, group string) (runlog.Store, error) {
	cfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, err
	}
	return runlog.CloudWatch{Client: cloudwatchlogs.NewFromConfig(cfg), Group: group}, nil
}
