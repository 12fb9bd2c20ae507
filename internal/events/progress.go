package events

import (
	"context"
	"fmt"

	"crawlq/internal/dbsqlc"
)

// Depth returns a live run's waiting and running page jobs (what `crawlq run --watch` shows as
// its queue depth).
func Depth(ctx context.Context, db DB, runID int64) (waiting, running int64, err error) {
	d, err := dbsqlc.New(db).RunJobDepth(ctx, runID)
	if err != nil {
		return 0, 0, fmt.Errorf("queue depth of run %d: %w", runID, err)
	}
	return d.Waiting, d.Running, nil
}
