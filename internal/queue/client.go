package queue

import (
	"cmp"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what the client needs from a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config tunes a Client. The zero value is valid.
type Config struct {
	// RetryBase is the delay before the first retry; each further attempt doubles it. Default 1s.
	RetryBase time.Duration
	// RetryMax caps the retry delay. Default 1h.
	RetryMax time.Duration
}

func (c Config) withDefaults() Config {
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Hour
	}
	return c
}

// Client talks to the queue tables through a pool.
type Client struct {
	pool *pgxpool.Pool
	cfg  Config
}

// New returns a client on pool.
func New(pool *pgxpool.Pool, cfg Config) *Client {
	return &Client{pool: pool, cfg: cfg.withDefaults()}
}

// Pool returns the client's pool.
func (c *Client) Pool() *pgxpool.Pool { return c.pool }

// Backoff returns the delay before retrying after failed attempt number attempt (1-based):
// exponential from RetryBase, capped at RetryMax, with "equal jitter" (half fixed, half random)
// so that jobs failing together do not retry together.
func (c *Client) Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := c.cfg.RetryBase
	for i := 1; i < attempt && d < c.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.RetryMax)
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}

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
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	results := make([]EnqueueResult, len(ps))
	// ON CONFLICT DO UPDATE cannot touch one row twice in a statement, so a key repeated within
	// the batch is resolved here by the same rule the database applies between statements.
	type slot struct {
		first int   // the index sent to the database
		dups  []int // later indexes folded into it
	}
	byKey := map[[2]string]*slot{}
	var send [3][]int // indexes to send, per duplicate mode
	var once []int    // indexes with once keys, sent in a statement of their own
	for i := range ps {
		p := &ps[i]
		if p.OnceKey != "" {
			once = append(once, i)
			continue
		}
		if p.UniqueKey != "" {
			k := [2]string{p.Queue, p.UniqueKey}
			if s, ok := byKey[k]; ok {
				s.dups = append(s.dups, i)
				continue
			}
			byKey[k] = &slot{first: i}
		}
		send[p.OnDuplicate] = append(send[p.OnDuplicate], i)
	}
	// Fold in-batch duplicates into the row that is sent.
	sent := make([]EnqueueParams, len(ps))
	copy(sent, ps)
	for _, s := range byKey {
		for _, d := range s.dups {
			f, p := &sent[s.first], &ps[d]
			switch p.OnDuplicate {
			case Replace:
				f.RunAt, f.Delay, f.Priority = p.RunAt, p.Delay, p.Priority
			case Earliest:
				if earlier(p, f) {
					f.RunAt, f.Delay = p.RunAt, p.Delay
				}
			}
		}
	}
	for mode, idx := range send {
		if len(idx) == 0 {
			continue
		}
		if err := c.insert(ctx, db, DuplicateMode(mode), sent, idx, results); err != nil {
			return nil, err
		}
	}
	if len(once) > 0 {
		sql, args, read := insertOnceStatement(ps, once, 0, results)
		rows, err := db.Query(ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		if err := read(rows); err != nil {
			return nil, err
		}
	}
	for _, s := range byKey {
		for _, d := range s.dups {
			results[d] = EnqueueResult{ID: results[s.first].ID, Duplicate: true}
		}
	}
	return results, nil
}

// EnqueueManyBatch queues the insert of ps on b, so that a caller can send it in one round trip
// with statements of its own (in its own transaction, or b's implicit one). The jobs must not have
// unique keys: folding duplicates needs the answers of earlier statements; once keys are fine.
// With limit > 0 at most limit jobs are inserted, the first ones not skipped for their once key
// (the once keys of those past the limit are used all the same). Invalid params are reported at once and queue nothing; out (len(ps)) receives the results when
// b's results are read: a job not inserted has ID 0, and Duplicate set if its once key was used.
func (c *Client) EnqueueManyBatch(b *pgx.Batch, ps []EnqueueParams, limit int, out []EnqueueResult) error {
	if len(out) != len(ps) || limit < 0 {
		return fmt.Errorf("%w: enqueue batch: %d results for %d jobs, limit %d", ErrInvalid, len(out), len(ps), limit)
	}
	var errs []error
	seen := names{}
	idx := make([]int, len(ps))
	for i := range ps {
		idx[i] = i
		err := ps[i].validate(seen)
		if err == nil && ps[i].UniqueKey != "" {
			err = fmt.Errorf("%w: unique key %q: use EnqueueManyTx for jobs with unique keys", ErrInvalid, ps[i].UniqueKey)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil || len(ps) == 0 {
		return err
	}
	sql, args, read := insertOnceStatement(ps, idx, limit, out)
	b.Queue(sql, args...).Query(read)
	return nil
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

// insertOnceStatement returns sqlInsertOnce for the jobs ps[idx] (at most limit, 0 for all) with its
// arguments, and the function that reads its rows into out. A once key repeated within idx is
// sent once; the later jobs with it are duplicates.
func insertOnceStatement(ps []EnqueueParams, idx []int, limit int, out []EnqueueResult) (string, []any, func(pgx.Rows) error) {
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
	c := columnsOf(ps, send)
	read := func(rows pgx.Rows) error {
		defer rows.Close()
		inserted := make([]bool, n)
		for rows.Next() {
			var id, o int64
			if err := rows.Scan(&id, &o); err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			if o < 1 || o > int64(n) {
				return fmt.Errorf("enqueue: result for job %d of %d", o, n)
			}
			out[send[o-1]].ID, inserted[o-1] = id, true
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("enqueue: %w", err)
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
	return sqlInsertOnce, []any{c.queues, c.kinds, c.prios, c.runAts, c.delays, c.maxes, c.parents, c.args, c.onces, limit}, read
}

// earlier reports whether a's requested start is before b's, comparing like with like where
// both are relative delays and falling back to wall-clock for absolute times.
func earlier(a, b *EnqueueParams) bool {
	at := func(p *EnqueueParams) time.Time {
		if !p.RunAt.IsZero() {
			return p.RunAt
		}
		return time.Now().Add(p.Delay)
	}
	return at(a).Before(at(b))
}

func (c *Client) insert(ctx context.Context, db DB, mode DuplicateMode, ps []EnqueueParams, idx []int, out []EnqueueResult) error {
	if copier, ok := db.(copyDB); ok && len(idx) >= copyMin && plain(ps, idx) {
		return c.copyInsert(ctx, copier, ps, idx, out)
	}
	sql, args, uniq := insertStatement(mode, ps, idx)
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return scanInserted(rows, uniq, idx, out)
}

// insertStatement returns the insert of the jobs ps[idx] with its arguments, and their unique
// keys in the order the rows come back.
func insertStatement(mode DuplicateMode, ps []EnqueueParams, idx []int) (string, []any, []string) {
	c := columnsOf(ps, idx)
	action := onConflictKeep
	switch mode {
	case Replace:
		action = onConflictReplace
	case Earliest:
		action = onConflictEarliest
	}
	return fmt.Sprintf(sqlInsert, action), []any{c.queues, c.kinds, c.prios, c.runAts, c.delays, c.maxes, c.uniq, c.parents, c.args}, c.uniq
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

// scanInserted reads an insert's rows into out (see insertStatement).
func scanInserted(rows pgx.Rows, uniq []string, idx []int, out []EnqueueResult) error {
	defer rows.Close()
	n := len(idx)
	j := 0
	for rows.Next() {
		var r EnqueueResult
		var key string
		if err := rows.Scan(&r.ID, &r.Duplicate, &key); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		if j >= n || key != uniq[j] {
			return fmt.Errorf("enqueue: result %d out of order (key %q)", j, key)
		}
		out[idx[j]] = r
		j++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if j != n {
		return fmt.Errorf("enqueue: %d results for %d jobs", j, n)
	}
	return nil
}

// ClaimParams says what to claim.
type ClaimParams struct {
	Queue  string
	Worker string        // recorded on each job; default "anonymous"
	Limit  int           // at most this many jobs; 1..10000
	Lease  time.Duration // lease length; default 30s
}

// Claim leases up to p.Limit due jobs of p.Queue in one statement. Each call uses a fresh random
// lease token shared by the jobs of that claim.
func (c *Client) Claim(ctx context.Context, p ClaimParams) ([]*Job, error) {
	if err := ValidateQueue(p.Queue); err != nil {
		return nil, err
	}
	if p.Limit < 1 || p.Limit > 10000 {
		return nil, fmt.Errorf("%w: claim limit %d: want 1..10000", ErrInvalid, p.Limit)
	}
	if p.Lease <= 0 {
		p.Lease = 30 * time.Second
	}
	if p.Worker == "" {
		p.Worker = "anonymous"
	}
	token := newToken()
	rows, err := c.pool.Query(ctx, sqlClaim, p.Queue, p.Limit, p.Lease.Milliseconds(), token, p.Worker)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	var jobs []*Job
	for rows.Next() {
		j := &Job{Queue: p.Queue, State: StateRunning, LeaseToken: token, Worker: p.Worker}
		var prio int16
		var lease, started time.Time
		if err := rows.Scan(&j.ID, &j.Kind, &j.Args, &prio, &j.RunAt, &j.Attempt, &j.MaxAttempts, &lease,
			&j.UniqueKey, &j.ParentID, &j.CancelRequested, &j.CreatedAt, &started); err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		j.Priority = int(prio)
		j.LeaseUntil, j.StartedAt = &lease, &started
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	// The update returns rows in the order it found them (by id); hand them out in claim order.
	slices.SortFunc(jobs, func(a, b *Job) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return jobs, nil
}

// newToken returns a random non-zero lease token.
func newToken() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if t := int64(binary.LittleEndian.Uint64(b[:]) >> 1); t != 0 {
			return t
		}
	}
}

// Promote makes up to limit delayed jobs that are now due available, and returns how many.
func (c *Client) Promote(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	var n int
	if err := c.pool.QueryRow(ctx, sqlPromote, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("promote: %w", err)
	}
	return n, nil
}

// HeartbeatResult reports what a heartbeat learned.
type HeartbeatResult struct {
	// Lost are the ids whose lease the caller no longer holds.
	Lost []int64
	// CancelRequested are held jobs that have been asked to cancel.
	CancelRequested []int64
}

// Heartbeat extends the given leases to now + lease in one statement.
func (c *Client) Heartbeat(ctx context.Context, leases []Lease, lease time.Duration) (HeartbeatResult, error) {
	var res HeartbeatResult
	if len(leases) == 0 {
		return res, nil
	}
	if lease <= 0 {
		lease = 30 * time.Second
	}
	ids, tokens := split(leases)
	rows, err := c.pool.Query(ctx, sqlHeartbeat, ids, tokens, lease.Milliseconds())
	if err != nil {
		return res, fmt.Errorf("heartbeat: %w", err)
	}
	defer rows.Close()
	held := make(map[Lease]bool, len(leases))
	for rows.Next() {
		var l Lease
		var cancel bool
		if err := rows.Scan(&l.ID, &l.Token, &cancel); err != nil {
			return res, fmt.Errorf("heartbeat: %w", err)
		}
		held[l] = true
		id := l.ID
		if cancel {
			res.CancelRequested = append(res.CancelRequested, id)
		}
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("heartbeat: %w", err)
	}
	for _, l := range leases {
		if !held[l] {
			res.Lost = append(res.Lost, l.ID)
		}
	}
	return res, nil
}

func split(leases []Lease) (ids, tokens []int64) {
	ids, tokens = make([]int64, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		ids[i], tokens[i] = l.ID, l.Token
	}
	return ids, tokens
}

// Complete marks a held job succeeded. ErrLeaseLost means the caller no longer held it.
func (c *Client) Complete(ctx context.Context, l Lease) error {
	return c.CompleteTx(ctx, c.pool, l)
}

// CompleteTx is Complete through db, so a handler can finish its job in the same transaction as
// the rows its work wrote.
func (c *Client) CompleteTx(ctx context.Context, db DB, l Lease) error {
	lost, err := c.CompleteManyTx(ctx, db, []Lease{l})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("complete job %d: %w", l.ID, ErrLeaseLost)
	}
	return nil
}

// CompleteMany marks held jobs succeeded in one statement and returns the ids whose lease was lost.
func (c *Client) CompleteMany(ctx context.Context, leases []Lease) (lost []int64, err error) {
	return c.CompleteManyTx(ctx, c.pool, leases)
}

// CompleteManyTx is CompleteMany through db.
func (c *Client) CompleteManyTx(ctx context.Context, db DB, leases []Lease) (lost []int64, err error) {
	return c.fenced(ctx, db, "complete", sqlComplete, leases)
}

// fenced runs a statement over leases that returns the ids it changed, and reports the rest as lost.
func (c *Client) fenced(ctx context.Context, db DB, verb, sql string, leases []Lease, extra ...any) ([]int64, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	ids, tokens := split(leases)
	rows, err := db.Query(ctx, sql, append([]any{ids, tokens}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	return lostLeases(verb, rows, leases)
}

// CompleteAllBatch queues on b the completion of held jobs, for a caller that sends it with its
// own statements and its COMMIT in one round trip: if any lease was lost, the statement fails
// with a *LeaseLostError naming them (errors.Is ErrLeaseLost), which aborts the transaction, so
// nothing after it commits.
func (c *Client) CompleteAllBatch(b *pgx.Batch, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	ids, tokens := split(leases)
	b.Queue(sqlCompleteAll, ids, tokens).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "CQ001" {
			lost := &LeaseLostError{}
			for _, f := range strings.Split(pgErr.Detail, ",") {
				if id, perr := strconv.ParseInt(f, 10, 64); perr == nil {
					lost.IDs = append(lost.IDs, id)
				}
			}
			return lost
		}
		if err != nil {
			return fmt.Errorf("complete: %w", err)
		}
		return nil
	}
}

// LeaseLostError names the jobs whose lease was lost in a CompleteAllBatch.
type LeaseLostError struct{ IDs []int64 }

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("queue: lease lost for %d job(s) %v", len(e.IDs), e.IDs)
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// lostLeases reads the leases a fenced statement changed and returns the ids of the others.
func lostLeases(verb string, rows pgx.Rows, leases []Lease) ([]int64, error) {
	done, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Lease])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	if len(done) == len(leases) {
		return nil, nil
	}
	changed := make(map[Lease]bool, len(done))
	for _, l := range done {
		changed[l] = true
	}
	var lost []int64
	for _, l := range leases {
		if !changed[l] {
			lost = append(lost, l.ID)
		}
	}
	return lost, nil
}

// FailOptions refine a failure.
type FailOptions struct {
	// RetryIn overrides the backoff (for example a server's Retry-After). Zero uses the backoff.
	RetryIn time.Duration
	// Dead ends the job now, without further attempts.
	Dead bool
}

// Fail records a failed attempt of the held job j. The job is retried after the backoff (or
// opts.RetryIn) while attempts remain, else it is dead with cause kept in its error history.
// It returns the job's new state.
func (c *Client) Fail(ctx context.Context, j *Job, cause error, opts FailOptions) (State, error) {
	delay := opts.RetryIn
	if delay <= 0 {
		delay = c.Backoff(j.Attempt)
	}
	msg := "unknown error"
	if cause != nil {
		msg = cause.Error()
	}
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	var st string
	var runAt time.Time
	err := c.pool.QueryRow(ctx, sqlFail, j.ID, j.LeaseToken, delay.Microseconds(), msg, opts.Dead).Scan(&st, &runAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("fail job %d: %w", j.ID, ErrLeaseLost)
	}
	if err != nil {
		return "", fmt.Errorf("fail job %d: %w", j.ID, err)
	}
	return State(st), nil
}

// Snooze puts a held job back to run after d without counting the attempt.
func (c *Client) Snooze(ctx context.Context, l Lease, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: snooze %s: must not be negative", ErrInvalid, d)
	}
	lost, err := c.fenced(ctx, c.pool, "snooze", sqlSnooze, []Lease{l}, d.Microseconds())
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("snooze job %d: %w", l.ID, ErrLeaseLost)
	}
	return nil
}

// Release hands held jobs back without counting the attempt: they are available again at their
// old place in line. It returns the ids whose lease was already lost.
func (c *Client) Release(ctx context.Context, leases []Lease) (lost []int64, err error) {
	return c.fenced(ctx, c.pool, "release", sqlSnooze, leases, int64(0))
}

// Rescue returns up to limit jobs whose lease expired to available (or dead when out of attempts,
// or cancelled when asked) and returns how many it rescued.
func (c *Client) Rescue(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	var n int
	if err := c.pool.QueryRow(ctx, sqlRescue, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("rescue: %w", err)
	}
	return n, nil
}

// Cancel cancels a job: a waiting job is cancelled at once (StateCancelled is returned); a running
// job is marked, its worker learns it at its next heartbeat, and StateRunning is returned.
// ErrFinished reports a job already finished, ErrNotFound an unknown id.
func (c *Client) Cancel(ctx context.Context, id int64) (State, error) {
	var st string
	err := c.pool.QueryRow(ctx, sqlCancel, id).Scan(&st)
	if err == nil {
		if State(st) == StateRunning {
			return StateRunning, nil
		}
		return StateCancelled, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("cancel job %d: %w", id, err)
	}
	err = c.pool.QueryRow(ctx, sqlJobState, id).Scan(&st)
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
	var n int
	if err := db.QueryRow(ctx, sqlCancelParent, parentID).Scan(&n); err != nil {
		return 0, fmt.Errorf("cancel jobs of %d: %w", parentID, err)
	}
	return n, nil
}

// HasUnfinishedTx reports whether run parentID has any job not yet finished, as seen by db.
func (c *Client) HasUnfinishedTx(ctx context.Context, db DB, parentID int64) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, sqlHasUnfinished, parentID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check jobs of %d: %w", parentID, err)
	}
	return ok, nil
}

// CancelHeld ends a held job as cancelled, fenced by its lease, with cause in its error history.
func (c *Client) CancelHeld(ctx context.Context, l Lease, cause error) error {
	msg := "cancelled"
	if cause != nil {
		msg = cause.Error()
	}
	var id int64
	err := c.pool.QueryRow(ctx, sqlCancelHeld, l.ID, l.Token, msg).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("cancel job %d: %w", l.ID, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("cancel job %d: %w", l.ID, err)
	}
	return nil
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
	rows, err := db.Query(ctx, sqlDeadChildren, parentID, kind, max(sample, 1))
	if err != nil {
		return 0, nil, fmt.Errorf("dead jobs of %d: %w", parentID, err)
	}
	defer rows.Close()
	var n int64
	var out []DeadJob
	for rows.Next() {
		var d DeadJob
		var args []byte
		if err := rows.Scan(&n, &d.ID, &args, &d.Attempts, &d.LastError); err != nil {
			return 0, nil, fmt.Errorf("dead jobs of %d: %w", parentID, err)
		}
		d.Args = args
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("dead jobs of %d: %w", parentID, err)
	}
	if sample <= 0 {
		out = nil
	}
	return n, out, nil
}

// RedriveParentTx makes the dead jobs of kind under parent parentID available again with a fresh
// attempt budget, and returns how many.
func (c *Client) RedriveParentTx(ctx context.Context, db DB, parentID int64, kind string) (int, error) {
	var n int
	if err := db.QueryRow(ctx, sqlRedriveParent, parentID, kind).Scan(&n); err != nil {
		return 0, fmt.Errorf("redrive jobs of %d: %w", parentID, err)
	}
	return n, nil
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
	rows, err := c.pool.Query(ctx, sqlRedrive, queue, ids, limit)
	if err != nil {
		return nil, fmt.Errorf("redrive: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("redrive: %w", err)
	}
	return out, nil
}

// RetentionParams says which finished jobs to delete. At least one of MaxAge and KeepPerQueue must be set.
type RetentionParams struct {
	// MaxAge deletes jobs finished longer ago than this. Zero: no age limit.
	MaxAge time.Duration
	// KeepPerQueue deletes all but the newest N finished jobs of each queue. Zero: no count limit.
	KeepPerQueue int
	// States limits deletion to these finished states. Default all three.
	States []State
	// BatchSize rows are deleted per statement, so no statement holds many locks. Default 5000.
	BatchSize int
	// MaxBatches bounds the work of one call. Default 100.
	MaxBatches int
}

// Retention deletes finished jobs in bounded batches and returns how many it deleted.
func (c *Client) Retention(ctx context.Context, p RetentionParams) (int64, error) {
	if p.MaxAge < 0 || p.KeepPerQueue < 0 {
		return 0, fmt.Errorf("%w: retention: max age and keep must not be negative", ErrInvalid)
	}
	if p.MaxAge == 0 && p.KeepPerQueue == 0 {
		return 0, fmt.Errorf("%w: retention: set a max age, a number to keep, or both", ErrInvalid)
	}
	states := []string{}
	for _, s := range p.States {
		if !s.Finished() {
			return 0, fmt.Errorf("%w: retention: state %q is not a finished state", ErrInvalid, s)
		}
		states = append(states, string(s))
	}
	if len(states) == 0 {
		states = []string{string(StateSucceeded), string(StateCancelled), string(StateDead)}
	}
	if p.BatchSize <= 0 {
		p.BatchSize = 5000
	}
	if p.MaxBatches <= 0 {
		p.MaxBatches = 100
	}
	var total int64
	batches := 0
	run := func(sql string, args ...any) error {
		for batches < p.MaxBatches {
			batches++
			var n int64
			if err := c.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
				return fmt.Errorf("retention: %w", err)
			}
			total += n
			if n < int64(p.BatchSize) {
				return nil
			}
		}
		return nil
	}
	if p.MaxAge > 0 {
		if err := run(sqlRetentionAge, p.MaxAge.Microseconds(), states, p.BatchSize); err != nil {
			return total, err
		}
	}
	if p.KeepPerQueue > 0 {
		queues, err := c.queues(ctx)
		if err != nil {
			return total, err
		}
		for _, q := range queues {
			if err := run(sqlRetentionKeep, q, states, p.KeepPerQueue, p.BatchSize); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

func (c *Client) queues(ctx context.Context) ([]string, error) {
	stats, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	qs := make([]string, len(stats))
	for i, s := range stats {
		qs[i] = s.Queue
	}
	return qs, nil
}

// QueueStats are one queue's counts.
type QueueStats struct {
	Queue string `json:"queue"`
	// Available counts due jobs waiting to run; Scheduled counts delayed ones (not yet due).
	Available int64 `json:"available"`
	Scheduled int64 `json:"scheduled"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Cancelled int64 `json:"cancelled"`
	Dead      int64 `json:"dead"`
	// PastDue counts jobs whose run_at has passed and that no worker has started.
	PastDue int64 `json:"past_due"`
	// OldestPastDue is the age of the oldest past-due job (0 when none).
	OldestPastDue time.Duration `json:"oldest_past_due_ns"`
}

// Stats returns per-queue counts, sorted by queue. No job rows are counted: state counts come from
// the trigger-maintained count tables (first folding pending deltas), the oldest past-due age from
// a loose index scan of crawlq_job_claim (one probe per distinct priority), and the delayed-but-due
// jobs not yet promoted from a range of crawlq_job_scheduled, which promotion keeps short. So the
// cost does not grow with the number of jobs: at 10 million rows it is a handful of index probes.
func (c *Client) Stats(ctx context.Context) ([]QueueStats, error) {
	if _, err := c.pool.Exec(ctx, sqlFoldCounts); err != nil {
		return nil, fmt.Errorf("stats: fold counts: %w", err)
	}
	rows, err := c.pool.Query(ctx, sqlCounts)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	byQueue := map[string]*QueueStats{}
	get := func(q string) *QueueStats {
		s := byQueue[q]
		if s == nil {
			s = &QueueStats{Queue: q}
			byQueue[q] = s
		}
		return s
	}
	for rows.Next() {
		var q, st string
		var n int64
		if err := rows.Scan(&q, &st, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("stats: %w", err)
		}
		s := get(q)
		switch State(st) {
		case StateAvailable:
			s.Available = n
		case StateScheduled:
			s.Scheduled = n
		case StateRunning:
			s.Running = n
		case StateSucceeded:
			s.Succeeded = n
		case StateCancelled:
			s.Cancelled = n
		case StateDead:
			s.Dead = n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	now := time.Now()
	var dbNow time.Time
	if err := c.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err == nil {
		now = dbNow
	}
	oldest := map[string]time.Time{}
	rows, err = c.pool.Query(ctx, sqlDueScheduled)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for rows.Next() {
		var q string
		var n int64
		var at time.Time
		if err := rows.Scan(&q, &n, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("stats: %w", err)
		}
		// Due but not yet promoted: waiting to run like any available job.
		s := get(q)
		s.Scheduled -= n
		s.Available += n
		oldest[q] = at
	}
	rows.Close()
	out := make([]QueueStats, 0, len(byQueue))
	for q, s := range byQueue {
		s.PastDue = s.Available // every available job is due and unstarted
		if s.Available > 0 {
			var at *time.Time
			if err := c.pool.QueryRow(ctx, sqlOldestAvailable, q).Scan(&at); err != nil {
				return nil, fmt.Errorf("stats: oldest in %s: %w", q, err)
			}
			if at != nil && (oldest[q].IsZero() || at.Before(oldest[q])) {
				oldest[q] = *at
			}
		}
		if t := oldest[q]; !t.IsZero() && now.After(t) {
			s.OldestPastDue = now.Sub(t)
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// Get reads one job.
func (c *Client) Get(ctx context.Context, id int64) (*Job, error) {
	rows, err := c.pool.Query(ctx, sqlGet, id)
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("get job %d: %w", id, ErrNotFound)
	}
	return jobs[0], nil
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
	rows, err := c.pool.Query(ctx, sqlList, p.Queue, states, p.Kind, p.ParentID, p.Limit, p.Before)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

func scanJobs(rows pgx.Rows) ([]*Job, error) {
	defer rows.Close()
	var out []*Job
	for rows.Next() {
		j := &Job{}
		var st string
		var prio int16
		var errs []byte
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &st, &j.Args, &prio, &j.RunAt, &j.Attempt, &j.MaxAttempts,
			&j.LeaseUntil, &j.LeaseToken, &j.Worker, &j.UniqueKey, &j.ParentID, &j.CancelRequested, &errs,
			&j.CreatedAt, &j.StartedAt, &j.FinishedAt); err != nil {
			return nil, err
		}
		j.State, j.Priority = State(st), int(prio)
		if len(errs) > 0 {
			if err := json.Unmarshal(errs, &j.Errors); err != nil {
				return nil, fmt.Errorf("job %d errors: %w", j.ID, err)
			}
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// LiveWorkers counts workers that heartbeated within horizon, by queue and kind ("lambda", "ecs",
// "process"), optionally for one queue. Dispatchers use it instead of eventually consistent ECS
// or Lambda listings.
func (c *Client) LiveWorkers(ctx context.Context, queue string, horizon time.Duration) (map[string]map[string]int, error) {
	rows, err := c.pool.Query(ctx, sqlLiveWorkers, queue, horizon.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("live workers: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]int{}
	for rows.Next() {
		var q, kind string
		var n int
		if err := rows.Scan(&q, &kind, &n); err != nil {
			return nil, fmt.Errorf("live workers: %w", err)
		}
		if out[q] == nil {
			out[q] = map[string]int{}
		}
		out[q][kind] = n
	}
	return out, rows.Err()
}

// PruneWorkers forgets workers not seen within horizon (they died without unregistering).
func (c *Client) PruneWorkers(ctx context.Context, horizon time.Duration) (int, error) {
	tag, err := c.pool.Exec(ctx, sqlPruneWorkers, horizon.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("prune workers: %w", err)
	}
	return int(tag.RowsAffected()), nil
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

// copyInsert inserts plain jobs with COPY, the fastest bulk path. COPY returns no ids, so they
// are drawn from the identity sequence first (one round trip; the sequence caches 1000 per session).
func (c *Client) copyInsert(ctx context.Context, db copyDB, ps []EnqueueParams, idx []int, out []EnqueueResult) error {
	rows, err := db.Query(ctx, sqlNextIDs, len(idx))
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if len(ids) != len(idx) {
		return fmt.Errorf("enqueue: got %d ids for %d jobs", len(ids), len(idx))
	}
	for j, i := range idx {
		out[i] = EnqueueResult{ID: ids[j]}
	}
	src := &copyRows{ps: ps, idx: idx, ids: ids, row: make([]any, 7), at: -1}
	perQueue := map[string]int{}
	for _, i := range idx {
		perQueue[ps[i].Queue]++
	}
	// The rows and their count delta commit together (a savepoint inside the caller's transaction).
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"crawlq_job"},
			[]string{"id", "queue", "kind", "priority", "max_attempts", "parent_id", "args"}, src); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		for q, n := range perQueue {
			if _, err := tx.Exec(ctx, sqlCopyDelta, q, n); err != nil {
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

// copyRows streams jobs to COPY, reusing one row buffer (pgx encodes each row before the next).
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

// Recount rebuilds the per-queue state counts from the job rows. Stats never need it; it repairs
// the counts after job rows were changed by SQL outside this package. It reads every job row.
func (c *Client) Recount(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		for _, q := range sqlRecount {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recount: %w", err)
	}
	return nil
}
