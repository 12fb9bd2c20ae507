package runlog

import (
	"context"
	"crawlq/internal/clock"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
)

// CloudWatch keeps each run's log in the stream "run-<id>" of a log group (which Terraform
// creates, with its retention).
type CloudWatch struct {
	Client *cloudwatchlogs.Client
	Group  string
	// Clock stamps the lines. Default the wall clock.
	Clock clock.Clock
}

func stream(runID int64) string { return "run-" + strconv.FormatInt(runID, 10) }

// Append implements Store. The stream is created on first use.
func (c CloudWatch) Append(ctx context.Context, runID int64, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	now := clock.Or(c.Clock).Now().UnixMilli()
	ev := make([]types.InputLogEvent, len(lines))
	for i, l := range lines {
		ev[i] = types.InputLogEvent{Message: aws.String(clean(l)), Timestamp: aws.Int64(now)}
	}
	return c.put(ctx, runID, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(c.Group), LogStreamName: aws.String(stream(runID)), LogEvents: ev})
}

// put sends in, creating the run's stream on first use.
func (c CloudWatch) put(ctx context.Context, runID int64, in *cloudwatchlogs.PutLogEventsInput) error {
	_, err := c.Client.PutLogEvents(ctx, in)
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		_, cerr := c.Client.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(c.Group), LogStreamName: aws.String(stream(runID))})
		var exists *types.ResourceAlreadyExistsException
		if cerr != nil && !errors.As(cerr, &exists) {
			return fmt.Errorf("append run %d log: create stream: %w", runID, cerr)
		}
		_, err = c.Client.PutLogEvents(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("append run %d log: %w", runID, err)
	}
	return nil
}

// Read implements Store. The cursor is CloudWatch's forward token.
func (c CloudWatch) Read(ctx context.Context, runID int64, from string) ([]Line, string, error) {
	in := &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String(c.Group), LogStreamName: aws.String(stream(runID)), StartFromHead: aws.Bool(true)}
	if from != "" {
		in.NextToken = aws.String(from)
	}
	out, err := c.Client.GetLogEvents(ctx, in)
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, from, nil // nothing written yet
	}
	if err != nil {
		return nil, from, fmt.Errorf("read run %d log: %w", runID, err)
	}
	next := aws.ToString(out.NextForwardToken)
	lines := make([]Line, 0, len(out.Events))
	for _, e := range out.Events {
		lines = append(lines, Line{Cursor: next, At: time.UnixMilli(aws.ToInt64(e.Timestamp)).UTC(), Text: aws.ToString(e.Message)})
	}
	if len(lines) == 0 {
		return nil, from, nil
	}
	return lines, next, nil
}
