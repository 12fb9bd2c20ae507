package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
)

// An operator's (and a run's) reads and changes of jobs it does not hold: get, list, cancel,
// redrive, and the questions a spider run asks about its jobs.

// Get reads one job.
func (c *Client) Get(ctx context.Context, id int64) (*Job, error) {
	row, err := c.q.GetJob(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	j, err := jobFromRow(row)
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// ListParams filter a job listing.
type ListParams struct {
	Queue    string
	States   []State
	Kind     string
	ParentID int64
	// Limit defaults to 100, at most 10000.
	Limit int
	// Before lists jobs with ids below it (keyset pagination). 0: from the newest.
	Before int64
}

// List returns jobs newest first.
func (c *Client) List(ctx context.Context, p ListParams) ([]*Job, error) {
	if p.Queue != "" {
		if err := ValidateQueue(p.Queue); err != nil {
			return nil, err
		}
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 0 || p.Limit > 10000 {
		return nil, fmt.Errorf("%w: limit %d: want 1..10000", ErrInvalid, p.Limit)
	}
	states := make([]string, len(p.States))
	for i, s := range p.States {
		if _, err := ParseState(string(s)); err != nil {
			return nil, err
		}
		states[i] = string(s)
	}
	rows, err := c.q.ListJobs(ctx, dbsqlc.ListJobsParams{Queue: p.Queue, States: states, Kind: p.Kind, ParentID: p.ParentID,
		Before: p.Before, MaxJobs: int32(p.Limit)})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := jobsFromRows(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// Cancel cancels a job: a waiting job is cancelled at once (StateCancelled is returned); a running
// job is marked, its worker learns it at its next heartbeat, and StateRunning is returned.
// ErrFinished reports a job already finished, ErrNotFound an unknown id.
func (c *Client) Cancel(ctx context.Context, id int64) (State, error) {
	st, err := c.q.CancelJob(ctx, dbsqlc.CancelJobParams{ID: id, Now: c.now()})
	if err == nil {
		if State(st) == StateRunning {
			return StateRunning, nil
		}
		return StateCancelled, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("cancel job %d: %w", id, err)
	}
	st, err = c.q.JobState(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("cancel job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("cancel job %d: %w", id, err)
	}
	return State(st), fmt.Errorf("cancel job %d (%s): %w", id, st, ErrFinished)
}

// CancelParentTx cancels every unfinished job of run parentID through db and returns how many it
// touched (waiting ones cancelled, running ones marked).
func (c *Client) CancelParentTx(ctx context.Context, db DB, parentID int64) (int, error) {
	n, err := dbsqlc.New(db).CancelParentJobs(ctx, dbsqlc.CancelParentJobsParams{ParentID: parentID, Now: c.now()})
	if err != nil {
		return 0, fmt.Errorf("cancel jobs of %d: %w", parentID, err)
	}
	return int(n), nil
}

// HasUnfinishedTx reports whether run parentID has any job not yet finished, as seen by db.
func (c *Client) HasUnfinishedTx(ctx context.Context, db DB, parentID int64) (bool, error) {
	ok, err := dbsqlc.New(db).HasUnfinishedJobs(ctx, parentID)
	if err != nil {
		return false, fmt.Errorf("check jobs of %d: %w", parentID, err)
	}
	return ok, nil
}

// DeadJob is a dead job as sampled by DeadChildrenTx.
type DeadJob struct {
	ID        int64
	Args      json.RawMessage
	Attempts  int
	LastError string
}

// DeadChildrenTx counts the dead jobs of kind under parent parentID and returns up to sample of
// them, newest first.
func (c *Client) DeadChildrenTx(ctx context.Context, db DB, parentID int64, kind string, sample int) (int64, []DeadJob, error) {
	rows, err := dbsqlc.New(db).DeadChildren(ctx, dbsqlc.DeadChildrenParams{ParentID: parentID, Kind: kind, MaxJobs: int32(max(sample, 1))})
	if err != nil {
		return 0, nil, fmt.Errorf("dead jobs of %d: %w", parentID, err)
	}
	var n int64
	var out []DeadJob
	for _, r := range rows {
		n = r.Total
		out = append(out, DeadJob{ID: r.ID, Args: r.Args, Attempts: int(r.Attempt), LastError: r.LastError})
	}
	if sample <= 0 {
		out = nil
	}
	return n, out, nil
}

// RedriveParentTx makes the dead jobs of kind under parent parentID available again with a fresh
// attempt budget, and returns how many.
func (c *Client) RedriveParentTx(ctx context.Context, db DB, parentID int64, kind string) (int, error) {
	n, err := dbsqlc.New(db).RedriveParentJobs(ctx, dbsqlc.RedriveParentJobsParams{ParentID: parentID, Kind: kind, Now: c.now()})
	if err != nil {
		return 0, fmt.Errorf("redrive jobs of %d: %w", parentID, err)
	}
	return int(n), nil
}

// Redrive makes dead jobs of queue available again with a fresh attempt budget: the listed ids,
// or, with none listed, up to limit of the queue's dead jobs. It returns the ids redriven.
func (c *Client) Redrive(ctx context.Context, queue string, ids []int64, limit int) ([]int64, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	if ids == nil {
		ids = []int64{}
	}
	out, err := c.q.RedriveJobs(ctx, dbsqlc.RedriveJobsParams{Queue: queue, Ids: ids, MaxJobs: int32(limit), Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("redrive: %w", err)
	}
	return out, nil
}
