package dbsqlc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlc generates a function per statement that sends it and reads its answer at once. A caller
// that sends several statements in one round trip (a pgx.Batch) still wants both halves typed: the
// Params struct in, the Row struct out. QueueMany and QueueExec give it that without repeating a
// positional argument list or a Scan: they run the generated function twice, once against a
// recorder that keeps its SQL and arguments (which are queued on the batch), and once, when the
// batch's answer arrives, against the rows of that answer (which the generated code scans).

// Queuer is where statements are queued: a *pgx.Batch, or a type that wraps one.
type Queuer interface {
	Queue(query string, arguments ...any) *pgx.QueuedQuery
}

// QueueMany queues the statement of a generated :many function (such as (*Queries).ClaimJobs)
// with arg on b; read gets its rows when b's results are read, and its error is the statement's.
func QueueMany[P, R any](b Queuer, query func(*Queries, context.Context, P) ([]R, error), arg P, read func([]R) error) {
	rec := record(func(q *Queries) error { _, err := query(q, context.Background(), arg); return err })
	b.Queue(rec.sql, rec.args...).Query(func(rows pgx.Rows) error {
		out, err := query(New(replay{rows: rows}), context.Background(), arg)
		if err != nil || read == nil {
			return err
		}
		return read(out)
	})
}

// QueueExec queues the statement of a generated :exec function with arg on b; its error is
// returned when b's results are read, unless the caller sets a callback on the returned query.
func QueueExec[P any](b Queuer, query func(*Queries, context.Context, P) error, arg P) *pgx.QueuedQuery {
	rec := record(func(q *Queries) error { return query(q, context.Background(), arg) })
	return b.Queue(rec.sql, rec.args...)
}

// errRecorded stops a generated function at its first call to the database.
var errRecorded = errors.New("dbsqlc: statement recorded")

// recorder is a DBTX that keeps the statement sent to it instead of sending it.
type recorder struct {
	sql  string
	args []any
}

func record(call func(*Queries) error) *recorder {
	rec := &recorder{}
	if err := call(New(rec)); !errors.Is(err, errRecorded) {
		// Only a generated function that does not go to the database at once gets here.
		panic(fmt.Sprintf("dbsqlc: recording a statement: %v", err))
	}
	return rec
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return errorRow{errRecorded}
}

type errorRow struct{ err error }

func (r errorRow) Scan(...any) error { return r.err }

// replay is a DBTX whose Query answers with rows already received (a batch's).
type replay struct{ rows pgx.Rows }

func (r replay) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("dbsqlc: replay: Exec")
}

func (r replay) Query(context.Context, string, ...any) (pgx.Rows, error) { return r.rows, nil }

func (r replay) QueryRow(context.Context, string, ...any) pgx.Row {
	return errorRow{errors.New("dbsqlc: replay: QueryRow")}
}
