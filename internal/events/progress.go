package events

import (
	"context"
	"fmt"
)

// Depth returns a live run's waiting and running page jobs (what `crawlq run --watch` shows as
// its queue depth).
func Depth(ctx context.Context, db DB, runID int64) (waiting, running int64, err error) {
	if err := db.QueryRow(ctx, sqlRunDepth, runID).Scan(&waiting, &running); err != nil {
		return 0, 0, fmt.Errorf("queue depth of run %d: %w", runID, err)
	}
	return waiting, running, nil
}
