package api

import (
	"context"
	"strconv"

	"crawlq/internal/events"
)

// JobReport is how a finished run was judged, as status and listjobs show it (internal/events).
type JobReport struct {
	// Outcome is the run's state, or "monitors_failed" for a run that succeeded while a monitor
	// failed; it is shown as the Job's outcome.
	Outcome string `json:"-"`
	// Monitors is the verdict: passed, failed, none (none declared) or skipped (failed/cancelled run).
	Monitors string         `json:"monitors"`
	Report   *events.Report `json:"report"`
}

// addReports fills in the report of each job that has one (finished runs, once the dispatch tick
// after their end has judged them).
func (a *API) addReports(ctx context.Context, jobs []Job) error {
	ids := make([]int64, 0, len(jobs))
	for _, j := range jobs {
		if id, err := strconv.ParseInt(j.ID, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	reps, err := events.Reports(ctx, a.cfg.Queue.Pool(), ids)
	if err != nil {
		return err
	}
	for i := range jobs {
		id, _ := strconv.ParseInt(jobs[i].ID, 10, 64)
		if rep := reps[id]; rep != nil {
			jobs[i].JobReport = &JobReport{Outcome: events.Outcome(jobs[i].State, rep.Monitors), Monitors: rep.Monitors, Report: rep}
			jobs[i].Outcome = jobs[i].JobReport.Outcome
		}
	}
	return nil
}
