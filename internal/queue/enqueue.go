package queue

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"crawlq/internal/dbsqlc"
)

// Adding jobs: InsertJobs (unique keys, one statement per duplicate mode present), InsertJobsOnce
// (once keys), and COPY for large batches of plain jobs.

// Enqueue adds one job.
func (c *Client) Enqueue(ctx context.Context, p EnqueueParams) (EnqueueResult, error) {
	return c.EnqueueTx(ctx, c.pool, p)
}

// EnqueueTx adds one job through db, typically the caller's transaction.
func (c *Client) EnqueueTx(ctx context.Context, db DB, p EnqueueParams) (EnqueueResult, error) {
	rs, err := c.EnqueueManyTx(ctx, db, []EnqueueParams{p})
	if err != nil {
		return EnqueueResult{}, err
	}
	return rs[0], nil
}

// EnqueueMany adds jobs in one round trip per duplicate mode present (usually one).
// Results are in the order of ps. Invalid input is rejected before anything is written.
func (c *Client) EnqueueMany(ctx context.Context, ps []EnqueueParams) ([]EnqueueResult, error) {
	return c.EnqueueManyTx(ctx, c.pool, ps)
}

// EnqueueManyTx is EnqueueMany through db, typically the caller's transaction.
func (c *Client) EnqueueManyTx(ctx context.Context, db DB, ps []EnqueueParams) ([]EnqueueResult, error) {
	if err := validateBatch(ps); err != nil {
		return nil, err
	}
	results := make([]EnqueueResult, len(ps))
	b := planBatch(ps, c.localNow())
	for mode, idx := range b.send {
		if len(idx) == 0 {
			continue
		}
		if err := c.insert(ctx, db, DuplicateMode(mode), b.sent, idx, results); err != nil {
			return nil, err
		}
	}
	if len(b.once) > 0 {
		if err := c.insertOnceNow(ctx, db, ps, b.once, 0, results); err != nil {
			return nil, err
		}
	}
	b.answerDuplicates(results)
	return results, nil
}

// validateBatch checks every job of an EnqueueManyTx batch and reports all that are invalid,
// each by its index when there is more than one.
func validateBatch(ps []EnqueueParams) error {
	var errs []error
	seen := names{}
	for i := range ps {
		if err := ps[i].validate(seen); err != nil {
			if len(ps) > 1 {
				err = fmt.Errorf("job %d: %w", i, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// batchPlan is how EnqueueManyTx sends a batch. ON CONFLICT DO UPDATE cannot touch one row twice
// in a statement, so a unique key repeated within the batch is resolved here by the same rule the
// database applies between statements: the later jobs with the key are folded into the first.
type batchPlan struct {
	sent  []EnqueueParams        // the batch with the folded jobs' changes applied to the first of their key
	send  [3][]int               // indexes to send, per duplicate mode
	once  []int                  // indexes with once keys, sent in a statement of their own
	byKey map[[2]string]*keySlot // queue and unique key to the jobs that have it
}

// keySlot is the jobs of a batch that share a unique key.
type keySlot struct {
	first int   // the index sent to the database
	dups  []int // later indexes folded into it
}

// planBatch groups ps by statement and folds in-batch duplicates into the job that is sent; now
// places a relative Delay beside an absolute RunAt.
func planBatch(ps []EnqueueParams, now time.Time) batchPlan {
	b := batchPlan{byKey: map[[2]string]*keySlot{}}
	for i := range ps {
		p := &ps[i]
		if p.OnceKey != "" {
			b.once = append(b.once, i)
			continue
		}
		if p.UniqueKey != "" {
			k := [2]string{p.Queue, p.UniqueKey}
			if s, ok := b.byKey[k]; ok {
				s.dups = append(s.dups, i)
				continue
			}
			b.byKey[k] = &keySlot{first: i}
		}
		b.send[p.OnDuplicate] = append(b.send[p.OnDuplicate], i)
	}
	b.sent = make([]EnqueueParams, len(ps))
	copy(b.sent, ps)
	for _, s := range b.byKey {
		for _, d := range s.dups {
			f, p := &b.sent[s.first], &ps[d]
			switch p.OnDuplicate {
			case Replace:
				f.RunAt, f.Delay, f.Priority = p.RunAt, p.Delay, p.Priority
			case Earliest:
				if earlier(p, f, now) {
					f.RunAt, f.Delay = p.RunAt, p.Delay
				}
			}
		}
	}
	return b
}

// answerDuplicates gives each folded job the result of the job it was folded into.
func (b *batchPlan) answerDuplicates(results []EnqueueResult) {
	for _, s := range b.byKey {
		for _, d := range s.dups {
			results[d] = EnqueueResult{ID: results[s.first].ID, Duplicate: true}
		}
	}
}

// validateOnceBatch checks jobs to insert with InsertJobsOnce in a caller's round trip (Tx.Enqueue,
// EnqueueLimitedTx): they must not have unique keys, since folding duplicates needs the answers of
// earlier statements; once keys are fine.
func validateOnceBatch(ps []EnqueueParams) error {
	var errs []error
	seen := names{}
	for i := range ps {
		err := ps[i].validate(seen)
		if err == nil && ps[i].UniqueKey != "" {
			err = fmt.Errorf("%w: unique key %q: use EnqueueManyTx for jobs with unique keys", ErrInvalid, ps[i].UniqueKey)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// EnqueueLimitedTx adds jobs without unique keys through db in one statement: with limit > 0 at
// most limit of them, the first ones not skipped for their once key (the once keys of those past
// the limit stay unused: a key is kept on its job). A job not inserted has ID 0 in its result, and Duplicate set
// if its once key was used.
func (c *Client) EnqueueLimitedTx(ctx context.Context, db DB, ps []EnqueueParams, limit int) ([]EnqueueResult, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%w: enqueue: limit %d", ErrInvalid, limit)
	}
	if err := validateOnceBatch(ps); err != nil {
		return nil, err
	}
	out := make([]EnqueueResult, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	if err := c.insertOnceNow(ctx, db, ps, allOf(ps), limit, out); err != nil {
		return nil, err
	}
	return out, nil
}

// insertOnceNow runs InsertJobsOnce through db for the jobs ps[idx] (see insertOnce) and puts
// their results in out.
func (c *Client) insertOnceNow(ctx context.Context, db DB, ps []EnqueueParams, idx []int, limit int, out []EnqueueResult) error {
	arg, read := c.insertOnce(ps, idx, limit, out)
	rows, err := dbsqlc.New(db).InsertJobsOnce(ctx, arg)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return read(rows)
}

// allOf returns the indexes of ps.
func allOf(ps []EnqueueParams) []int {
	idx := make([]int, len(ps))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// onceID is a once key in the scope of its parent.
type onceID struct {
	parent int64
	key    string
}

// onceHash is how a once key is stored.
func onceHash(key string) pgtype.UUID {
	if key == "" {
		return pgtype.UUID{}
	}
	return pgtype.UUID{Bytes: md5.Sum([]byte(key)), Valid: true}
}

// insertOnce returns the InsertJobsOnce arguments for the jobs ps[idx] (at most limit, 0 for all),
// and the function that reads its rows into out. A once key repeated within idx is sent once; the
// later jobs with it are duplicates.
func (c *Client) insertOnce(ps []EnqueueParams, idx []int, limit int, out []EnqueueResult) (dbsqlc.InsertJobsOnceParams, func([]dbsqlc.InsertJobsOnceRow) error) {
	first := map[onceID]bool{}
	var send []int
	for _, i := range idx {
		out[i] = EnqueueResult{}
		if k := ps[i].OnceKey; k != "" {
			o := onceID{ps[i].ParentID, k}
			if first[o] {
				out[i].Duplicate = true
				continue
			}
			first[o] = true
		}
		send = append(send, i)
	}
	n := len(send)
	col := columnsOf(ps, send)
	arg := dbsqlc.InsertJobsOnceParams{Now: c.now(), Queues: col.queues, Kinds: col.kinds, Priorities: col.prios,
		RunAts: col.runAts, DelaysUs: col.delays, MaxAttempts: col.maxes, ParentIds: col.parents, Args: col.args,
		Hashes: col.onces, MaxJobs: int32(limit)}
	read := func(rows []dbsqlc.InsertJobsOnceRow) error {
		inserted := make([]bool, n)
		for _, r := range rows {
			if r.Position < 1 || r.Position > int64(n) {
				return fmt.Errorf("enqueue: result for job %d of %d", r.Position, n)
			}
			out[send[r.Position-1]].ID, inserted[r.Position-1] = r.ID, true
		}
		// Not inserted: a used once key, or past the limit (only jobs after the limit was reached).
		taken := 0
		for j, ok := range inserted {
			if ok {
				taken++
			} else if ps[send[j]].OnceKey != "" && (limit == 0 || taken < limit) {
				out[send[j]].Duplicate = true
			}
		}
		return nil
	}
	return arg, read
}

// earlier reports whether a's requested start is before b's, a relative Delay counted from now.
func earlier(a, b *EnqueueParams, now time.Time) bool {
	at := func(p *EnqueueParams) time.Time {
		if !p.RunAt.IsZero() {
			return p.RunAt
		}
		return now.Add(p.Delay)
	}
	return at(a).Before(at(b))
}

// insert inserts the jobs ps[idx], whose duplicates take mode, and puts their results in out.
func (c *Client) insert(ctx context.Context, db DB, mode DuplicateMode, ps []EnqueueParams, idx []int, out []EnqueueResult) error {
	if copier, ok := db.(copyDB); ok && len(idx) >= copyMin && plain(ps, idx) && c.cfg.Clock == nil {
		return c.copyInsert(ctx, copier, ps, idx, out)
	}
	col := columnsOf(ps, idx)
	rows, err := dbsqlc.New(db).InsertJobs(ctx, dbsqlc.InsertJobsParams{Now: c.now(), Queues: col.queues, Kinds: col.kinds,
		Priorities: col.prios, RunAts: col.runAts, DelaysUs: col.delays, MaxAttempts: col.maxes, UniqueKeys: col.uniq,
		ParentIds: col.parents, Args: col.args, Mode: mode.String()})
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if len(rows) != len(idx) {
		return fmt.Errorf("enqueue: %d results for %d jobs", len(rows), len(idx))
	}
	for j, r := range rows {
		if r.Key != col.uniq[j] {
			return fmt.Errorf("enqueue: result %d out of order (key %q)", j, r.Key)
		}
		out[idx[j]] = EnqueueResult{ID: r.ID, Duplicate: r.Dup}
	}
	return nil
}

// columns are jobs to insert as parallel arrays, one per column, for the statements' unnest.
type columns struct {
	queues, kinds, uniq, args []string
	prios                     []int16
	maxes                     []int32
	runAts                    []time.Time
	delays, parents           []int64
	onces                     []pgtype.UUID // MD5 of each once key (onceHash)
}

// columnsOf returns the columns of the jobs ps[idx], defaults applied.
func columnsOf(ps []EnqueueParams, idx []int) columns {
	n := len(idx)
	c := columns{queues: make([]string, n), kinds: make([]string, n), uniq: make([]string, n), args: make([]string, n),
		prios: make([]int16, n), maxes: make([]int32, n), runAts: make([]time.Time, n), delays: make([]int64, n),
		parents: make([]int64, n), onces: make([]pgtype.UUID, n)}
	for j, i := range idx {
		p := &ps[i]
		c.queues[j], c.kinds[j], c.uniq[j] = p.Queue, p.Kind, p.UniqueKey
		c.args[j] = "{}"
		if len(p.Args) > 0 {
			c.args[j] = string(p.Args)
		}
		c.prios[j] = int16(p.Priority)
		c.maxes[j] = int32(p.MaxAttempts)
		if c.maxes[j] == 0 {
			c.maxes[j] = DefaultMaxAttempts
		}
		if !p.RunAt.IsZero() {
			c.runAts[j] = p.RunAt
		}
		c.delays[j], c.parents[j], c.onces[j] = p.Delay.Microseconds(), p.ParentID, onceHash(p.OnceKey)
	}
	return c
}

// copyMin is the batch size from which plain jobs are inserted with COPY.
const copyMin = 64

// copyDB is a DB that can COPY and begin a (sub)transaction: a pool or a transaction.
type copyDB interface {
	DB
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// plain reports whether every job at idx is due now and has no unique key: nothing for the
// database to decide per row, so COPY can insert them.
func plain(ps []EnqueueParams, idx []int) bool {
	for _, i := range idx {
		if p := &ps[i]; p.UniqueKey != "" || p.OnceKey != "" || p.Delay != 0 || !p.RunAt.IsZero() {
			return false
		}
	}
	return true
}

// copyColumns are the columns copyRows gives COPY, in its order; the others take their defaults
// (state 'available', run_at and created_at now()). COPY is the one insert not in
// internal/dbsqlc. sqlc's :copyfrom adds CopyFrom to its package's DBTX, which every package's
// three-method DB and dbsqlc's batch recorder would then need, so it would live in a generated
// package of its own; and its rows are a []Params built first and a new []any per row: on
// BenchmarkEnqueueMany, 200 B more garbage per job (804 KB against 612 KB per 1000) and 20–35%
// more client CPU (user 1.27–1.46 s against 1.00–1.17 s for 600k jobs). This path is the bulk
// fast path (see copyInsert), so it stays on pgx.CopyFrom with this typed row builder.
var copyColumns = []string{"id", "queue", "kind", "priority", "max_attempts", "parent_id", "args"}

// copyInsert inserts plain jobs with COPY, the fastest bulk path. COPY returns no ids, so they
// are drawn from the identity sequence first (one round trip; the sequence caches 1000 per session).
// It is not used with a Config.Clock: COPY takes the database's clock for run_at.
func (c *Client) copyInsert(ctx context.Context, db copyDB, ps []EnqueueParams, idx []int, out []EnqueueResult) error {
	ids, err := dbsqlc.New(db).NextJobIDs(ctx, int32(len(idx)))
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if len(ids) != len(idx) {
		return fmt.Errorf("enqueue: got %d ids for %d jobs", len(ids), len(idx))
	}
	for j, i := range idx {
		out[i] = EnqueueResult{ID: ids[j]}
	}
	src := &copyRows{ps: ps, idx: idx, ids: ids, row: make([]any, len(copyColumns)), at: -1}
	perQueue := map[string]int64{}
	for _, i := range idx {
		perQueue[ps[i].Queue]++
	}
	// The rows and their count delta commit together (a savepoint inside the caller's transaction).
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"crawlq_job"}, copyColumns, src); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		q := dbsqlc.New(tx)
		for queue, n := range perQueue {
			if err := q.RecordCopiedJobs(ctx, dbsqlc.RecordCopiedJobsParams{Queue: queue, N: n}); err != nil {
				return fmt.Errorf("count: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return nil
}

// copyRows streams jobs to COPY as rows of copyColumns, reusing one row buffer (pgx encodes each
// row before the next).
type copyRows struct {
	ps  []EnqueueParams
	idx []int
	ids []int64
	row []any
	at  int
}

func (r *copyRows) Next() bool { r.at++; return r.at < len(r.idx) }
func (r *copyRows) Err() error { return nil }

func (r *copyRows) Values() ([]any, error) {
	p := &r.ps[r.idx[r.at]]
	args := "{}"
	if len(p.Args) > 0 {
		args = string(p.Args)
	}
	maxAttempts := p.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = DefaultMaxAttempts
	}
	var parent any
	if p.ParentID != 0 {
		parent = p.ParentID
	}
	r.row[0], r.row[1], r.row[2], r.row[3], r.row[4], r.row[5], r.row[6] =
		r.ids[r.at], p.Queue, p.Kind, int16(p.Priority), int32(maxAttempts), parent, args
	return r.row, nil
}
