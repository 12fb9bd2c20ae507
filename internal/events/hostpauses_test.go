package events_test

import (
	"maps"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/events"
)

// A run's host pauses reach its report (and its events) from the run's own counter, host_pauses,
// apart from the errors; a run an older release's workers finished, whose pauses are folded
// among the kinds as host_paused, reads the same.
func TestReportCountsHostPausesApart(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := ctxT(t, 10*time.Second)
	for _, c := range []struct {
		name, byKind string
		column       int64
	}{
		{"counter", `{"status_5xx": 1}`, 2},
		{"older release's kind", `{"status_5xx": 1, "host_paused": 2}`, 0},
	} {
		id := fixtureRun(t, pool, "shop", 0, 0, "running")
		_, err := pool.Exec(ctx, `UPDATE crawlq_run SET state = 'succeeded', finished_at = now(), pages = 5, errors = 1,
			host_pauses = $2, errors_by_kind = $3::jsonb WHERE id = $1`, id, c.column, c.byKind)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newPublisher(t, events.Config{Pool: pool}).Drain(ctx); err != nil {
			t.Fatal(err)
		}
		st := report(t, pool, id).Stats
		if st.HostPauses != 2 || st.Errors != 1 || !maps.Equal(st.ErrorsByKind, map[string]int64{"status_5xx": 1}) {
			t.Errorf("%s: report stats host_pauses %d, errors %d, errors_by_kind %v; want 2, 1 and only status_5xx",
				c.name, st.HostPauses, st.Errors, st.ErrorsByKind)
		}
	}
}
