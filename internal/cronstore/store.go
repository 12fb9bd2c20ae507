// Package cronstore owns crawlq_schedule: recurring runs kept in Postgres, for `crawlq local`,
// which has no EventBridge Scheduler. Store answers the EventBridge Scheduler calls the api makes
// (api.Scheduler), so addschedule, listschedules and delschedule behave as on AWS; FireDue fires
// the schedules whose tick has come, each exactly once: the firing transaction holds the
// schedule's row and advances its next tick before it commits.
//
// Its SQL lives here, beside the tables it touches (crawlq_schedule, and crawlq_schedule_firer:
// when a process last looked for due schedules), rather than in internal/dbsqlc: they have no
// other reader.
package cronstore

import (
	"context"
	"crawlq/internal/clock"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxAge is how late a tick may still fire, as the api's EventBridge schedules allow
// (MaximumEventAgeInSeconds): a tick missed for longer, while no `crawlq local` ran, is skipped
// and recorded as such rather than started late.
const MaxAge = time.Hour

// Config wires a Store. Pool is required.
type Config struct {
	Pool *pgxpool.Pool
	// Clock tells when a schedule's next tick is due. Default the wall clock; tests stop it
	// and move it.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Store keeps schedules in Postgres.
type Store struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	marked time.Time // when markLooked last recorded a look
}

// New returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("cronstore: Pool is required")
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Store{cfg: cfg, log: cfg.Logger}, nil
}

// Entry is one stored schedule.
type Entry struct {
	Group, Name, Expression, Timezone, State, Description string
	// Input is the api payload each tick sends.
	Input  string
	NextAt time.Time
	// LastTickAt is the last tick fired or skipped (nil: none yet); LastRun what firing it
	// answered (the run's jobid); LastError why it failed or was skipped.
	LastTickAt           *time.Time
	LastRun, LastError   string
	CreatedAt, UpdatedAt time.Time
}

const columns = `grp, name, expression, timezone, state, description, input, next_at, last_tick_at, last_run, last_error, created_at, updated_at`

func scan(row pgx.Row) (Entry, error) {
	var e Entry
	err := row.Scan(&e.Group, &e.Name, &e.Expression, &e.Timezone, &e.State, &e.Description, &e.Input, &e.NextAt,
		&e.LastTickAt, &e.LastRun, &e.LastError, &e.CreatedAt, &e.UpdatedAt)
	return e, err
}

// entryOf checks what CreateSchedule and UpdateSchedule were given.
func (s *Store) entryOf(group, name, expr, tz *string, state types.ScheduleState, desc *string, target *types.Target) (Entry, Schedule, error) {
	e := Entry{Group: aws.ToString(group), Name: aws.ToString(name), Expression: aws.ToString(expr), Timezone: aws.ToString(tz),
		State: string(state), Description: aws.ToString(desc)}
	if e.Group == "" {
		e.Group = "default"
	}
	if e.Timezone == "" {
		e.Timezone = "UTC"
	}
	if e.State == "" {
		e.State = string(types.ScheduleStateEnabled)
	}
	switch {
	case e.Name == "":
		return e, Schedule{}, &types.ValidationException{Message: aws.String("schedule name is required")}
	case target == nil || target.Input == nil:
		return e, Schedule{}, &types.ValidationException{Message: aws.String("schedule target input is required")}
	case e.State != string(types.ScheduleStateEnabled) && e.State != string(types.ScheduleStateDisabled):
		return e, Schedule{}, &types.ValidationException{Message: aws.String("state: want ENABLED or DISABLED")}
	}
	e.Input = aws.ToString(target.Input)
	sc, err := Parse(e.Expression, e.Timezone)
	if err != nil {
		return e, sc, &types.ValidationException{Message: aws.String(err.Error())}
	}
	e.NextAt = sc.First(s.cfg.Clock.Now())
	return e, sc, nil
}

// CreateSchedule stores a new schedule; a name its group holds already is a ConflictException.
func (s *Store) CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	e, _, err := s.entryOf(in.GroupName, in.Name, in.ScheduleExpression, in.ScheduleExpressionTimezone, in.State, in.Description, in.Target)
	if err != nil {
		return nil, err
	}
	tag, err := s.cfg.Pool.Exec(ctx, `INSERT INTO crawlq_schedule (grp, name, expression, timezone, state, description, input, next_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (grp, name) DO NOTHING`,
		e.Group, e.Name, e.Expression, e.Timezone, e.State, e.Description, e.Input, e.NextAt)
	if err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", e.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, &types.ConflictException{Message: aws.String(fmt.Sprintf("schedule %s already exists", e.Name))}
	}
	return &scheduler.CreateScheduleOutput{ScheduleArn: aws.String(arn(e.Group, e.Name))}, nil
}

// UpdateSchedule replaces a schedule; its next tick is computed afresh from now.
func (s *Store) UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	e, _, err := s.entryOf(in.GroupName, in.Name, in.ScheduleExpression, in.ScheduleExpressionTimezone, in.State, in.Description, in.Target)
	if err != nil {
		return nil, err
	}
	tag, err := s.cfg.Pool.Exec(ctx, `UPDATE crawlq_schedule SET expression = $3, timezone = $4, state = $5, description = $6, input = $7,
next_at = $8, last_error = '', updated_at = now() WHERE grp = $1 AND name = $2`,
		e.Group, e.Name, e.Expression, e.Timezone, e.State, e.Description, e.Input, e.NextAt)
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", e.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, notFound(e.Name)
	}
	return &scheduler.UpdateScheduleOutput{ScheduleArn: aws.String(arn(e.Group, e.Name))}, nil
}

func notFound(name string) error {
	return &types.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("schedule %s does not exist", name))}
}

func arn(group, name string) string { return "arn:crawlq:local:schedule/" + group + "/" + name }

func group(g *string) string {
	if aws.ToString(g) == "" {
		return "default"
	}
	return aws.ToString(g)
}

// Get returns one schedule, or a ResourceNotFoundException.
func (s *Store) Get(ctx context.Context, grp, name string) (Entry, error) {
	e, err := scan(s.cfg.Pool.QueryRow(ctx, `SELECT `+columns+` FROM crawlq_schedule WHERE grp = $1 AND name = $2`, grp, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, notFound(name)
	}
	if err != nil {
		return e, fmt.Errorf("get schedule %s: %w", name, err)
	}
	return e, nil
}

// GetSchedule answers as EventBridge Scheduler does.
func (s *Store) GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	e, err := s.Get(ctx, group(in.GroupName), aws.ToString(in.Name))
	if err != nil {
		return nil, err
	}
	return &scheduler.GetScheduleOutput{Name: aws.String(e.Name), GroupName: aws.String(e.Group), Arn: aws.String(arn(e.Group, e.Name)),
		ScheduleExpression: aws.String(e.Expression), ScheduleExpressionTimezone: aws.String(e.Timezone),
		State: types.ScheduleState(e.State), Description: aws.String(e.Description), Target: &types.Target{Input: aws.String(e.Input)},
		CreationDate: aws.Time(e.CreatedAt), LastModificationDate: aws.Time(e.UpdatedAt)}, nil
}

// listPage is how many schedules one ListSchedules answer holds.
const listPage = 100

// List returns a group's schedules by name, at most limit after the name after.
func (s *Store) List(ctx context.Context, grp, after string, limit int) ([]Entry, error) {
	rows, err := s.cfg.Pool.Query(ctx, `SELECT `+columns+` FROM crawlq_schedule WHERE grp = $1 AND name > $2 ORDER BY name LIMIT $3`,
		grp, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// ListSchedules answers as EventBridge Scheduler does, a page at a time.
func (s *Store) ListSchedules(ctx context.Context, in *scheduler.ListSchedulesInput, _ ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error) {
	es, err := s.List(ctx, group(in.GroupName), aws.ToString(in.NextToken), listPage)
	if err != nil {
		return nil, err
	}
	out := &scheduler.ListSchedulesOutput{}
	for _, e := range es {
		out.Schedules = append(out.Schedules, types.ScheduleSummary{Name: aws.String(e.Name), GroupName: aws.String(e.Group),
			Arn: aws.String(arn(e.Group, e.Name)), State: types.ScheduleState(e.State)})
	}
	if len(es) == listPage {
		out.NextToken = aws.String(es[len(es)-1].Name)
	}
	return out, nil
}

// DeleteSchedule deletes a schedule, or answers a ResourceNotFoundException.
func (s *Store) DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	tag, err := s.cfg.Pool.Exec(ctx, `DELETE FROM crawlq_schedule WHERE grp = $1 AND name = $2`, group(in.GroupName), aws.ToString(in.Name))
	if err != nil {
		return nil, fmt.Errorf("delete schedule %s: %w", aws.ToString(in.Name), err)
	}
	if tag.RowsAffected() == 0 {
		return nil, notFound(aws.ToString(in.Name))
	}
	return &scheduler.DeleteScheduleOutput{}, nil
}

// Expression checks an expression as CreateSchedule will: rate(N seconds), which only this store
// fires, as it is; anything else through check (the api's rewriting of what a user wrote into
// EventBridge's syntax), then whether this store can fire it (no L, W or #).
func (s *Store) Expression(expr string, check func(string) (string, error)) (string, error) {
	e := strings.TrimSpace(expr)
	if !rateRe.MatchString(e) || !strings.Contains(e, "second") {
		var err error
		if e, err = check(expr); err != nil {
			return "", err
		}
	}
	if _, err := Parse(e, ""); err != nil {
		return "", err
	}
	return e, nil
}

// txTimeout bounds a firing transaction, the fire included (the api's own timeout under crawlq
// local is 30s).
const txTimeout = time.Minute

// Fire is what firing one tick of a schedule does (the api's schedule action, with the
// schedule's input): it returns what to record of it (the run's jobid) or why it failed.
type Fire func(ctx context.Context, e Entry, tick time.Time) (string, error)

// FireDue fires the enabled schedules whose tick has come, at most limit, and returns how many
// ticks it fired. Each is fired in its own transaction, which holds the schedule's row (others
// skip it) and advances its next tick before committing: a tick fires once across processes and
// restarts. A tick older than MaxAge is skipped and recorded. A failed fire is recorded on the
// schedule (LastError) and logged; its tick is not retried. It also records that a process looks
// (LastLook).
func (s *Store) FireDue(ctx context.Context, limit int, fire Fire) (int, error) {
	if err := s.markLooked(ctx); err != nil {
		// Only what crawlq schedules says of the firer depends on it; firing goes on.
		s.log.Warn("cronstore: crawlq schedules may say no crawlq local fires them", "err", err)
	}
	n := 0
	for i := 0; i < limit; i++ {
		fired, ok, err := s.fireOne(ctx, fire)
		if err != nil || !ok {
			return n, err
		}
		if fired {
			n++
		}
	}
	return n, nil
}

// fireOne fires the most overdue due schedule, if any (ok), and reports whether it fired.
func (s *Store) fireOne(ctx context.Context, fire Fire) (fired, ok bool, err error) {
	// The transaction, the fire included, outlives ctx: a stop lets a tick being fired finish and
	// its next_at advance, rather than leave it half done (its run created, its tick still due).
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txTimeout)
	defer cancel()
	err = pgx.BeginFunc(tctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		now := s.cfg.Clock.Now()
		e, err := scan(tx.QueryRow(tctx, `SELECT `+columns+` FROM crawlq_schedule WHERE state = 'ENABLED' AND next_at <= $1
ORDER BY next_at LIMIT 1 FOR UPDATE SKIP LOCKED`, now))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		tick := e.NextAt
		sc, err := Parse(e.Expression, e.Timezone)
		var ref, why string
		switch {
		case err != nil:
			why = err.Error() // stored before a change to what Parse accepts; never fires
			s.log.Error("cronstore: schedule cannot fire", "schedule", e.Name, "err", err)
		case now.Sub(tick) > MaxAge:
			why = fmt.Sprintf("tick %s skipped: more than %s late (no crawlq local was running)", tick.UTC().Format(time.RFC3339), MaxAge)
			s.log.Warn("cronstore: "+why, "schedule", e.Name)
		default:
			ref, err = fire(tctx, e, tick)
			if err != nil {
				why = err.Error()
				s.log.Error("cronstore: schedule fired and failed", "schedule", e.Name, "tick", tick, "err", err)
			} else {
				fired = true
				s.log.Info("cronstore: schedule fired", "schedule", e.Name, "tick", tick, "late", now.Sub(tick), "run", ref)
			}
		}
		next := now.Add(24 * time.Hour) // an expression that no longer parses is looked at daily
		if sc.rate > 0 || sc.cron != nil {
			next = sc.After(tick, now)
		}
		_, err = tx.Exec(tctx, `UPDATE crawlq_schedule SET next_at = $3, last_tick_at = $4, last_run = $5, last_error = $6
WHERE grp = $1 AND name = $2`, e.Group, e.Name, next, tick, ref, why)
		return err
	})
	if err != nil {
		return false, false, fmt.Errorf("fire schedules: %w", err)
	}
	return fired, ok, nil
}

// NextDue is the soonest tick of an enabled schedule (false when there is none).
func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	var t *time.Time
	if err := s.cfg.Pool.QueryRow(ctx, `SELECT min(next_at) FROM crawlq_schedule WHERE state = 'ENABLED'`).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("next schedule: %w", err)
	}
	if t == nil {
		return time.Time{}, false, nil
	}
	return *t, true, nil
}
