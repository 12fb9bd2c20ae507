package spiderstore

// Run records: what a run of a stored spider was scheduled with and ran.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"crawlq/internal/dbsqlc"
)

// RunRecord is what a run of a stored spider was scheduled with and ran.
type RunRecord struct {
	RunID    int64             `json:"run_id"`
	Project  string            `json:"project"`
	Spider   string            `json:"spider"`
	Version  string            `json:"version"`
	JobID    string            `json:"jobid,omitempty"`
	Settings map[string]string `json:"settings,omitempty"` // Scrapy settings
	PID      int               `json:"pid,omitempty"`
}

// RecordRun stores what a run was scheduled with. The crawl may have recorded the run's version
// already (pinned when it scheduled the run, or the one it started with): that version is kept.
// A job id already used is ErrExists.
func (s *Store) RecordRun(ctx context.Context, r RunRecord) error {
	set := r.Settings
	if set == nil {
		set = map[string]string{}
	}
	b, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("record run %d: %w", r.RunID, err)
	}
	err = s.db.InsertSpiderRun(ctx, dbsqlc.InsertSpiderRunParams{
		RunID: r.RunID, Project: r.Project, Spider: r.Spider, Version: r.Version, Jobid: r.JobID, Settings: string(b),
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: jobid %q is already used by another run", ErrExists, clip(r.JobID))
	}
	if err != nil {
		return fmt.Errorf("record run %d: %w", r.RunID, err)
	}
	return nil
}

// JobIDTaken reports which run uses a client's job id (0 if none).
func (s *Store) JobIDTaken(ctx context.Context, jobid string) (int64, error) {
	id, err := s.db.SpiderRunByJobID(ctx, jobid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("find jobid: %w", err)
	}
	return id, nil
}

// runRecord decodes a stored run record.
func runRecord(row dbsqlc.CrawlqSpiderRun) (RunRecord, error) {
	rr := RunRecord{RunID: row.RunID, Project: row.Project, Spider: row.Spider, Version: row.Version,
		JobID: row.Jobid.String, PID: int(row.Pid.Int32)}
	if err := json.Unmarshal(row.Settings, &rr.Settings); err != nil {
		return rr, fmt.Errorf("run %d settings: %w", row.RunID, err)
	}
	return rr, nil
}

// Run reads a run's record (ErrNotFound when it has none).
func (s *Store) Run(ctx context.Context, runID int64) (RunRecord, error) {
	row, err := s.db.GetSpiderRun(ctx, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return RunRecord{}, fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	if err != nil {
		return RunRecord{}, fmt.Errorf("get run record %d: %w", runID, err)
	}
	return runRecord(row)
}

// Runs reads the records of many runs, by run id (runs without one are absent).
func (s *Store) Runs(ctx context.Context, ids []int64) (map[int64]RunRecord, error) {
	rows, err := s.db.SpiderRuns(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("get run records: %w", err)
	}
	out := make(map[int64]RunRecord, len(rows))
	for _, row := range rows {
		r, err := runRecord(row)
		if err != nil {
			return nil, fmt.Errorf("get run records: %w", err)
		}
		out[r.RunID] = r
	}
	return out, nil
}

// StartRun records the version a run resolved to (a version pinned at schedule wins) and the
// pid of its command (0: none), and returns the version the run must use.
func (s *Store) StartRun(ctx context.Context, runID int64, project, name, version string, pid int) (string, error) {
	v, err := s.db.StartSpiderRun(ctx, dbsqlc.StartSpiderRunParams{RunID: runID, Project: project, Spider: name, Version: version, Pid: int32(pid)})
	if err != nil {
		return "", fmt.Errorf("record run %d start: %w", runID, err)
	}
	return v, nil
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
