package dbsqlc

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Each runs the statement of a generated :many function (such as (*Queries).ListAllRunItems)
// with arg on db and hands each row to scan as it arrives, where the generated function would
// collect every row in one slice first: a caller reading a result of any size holds one row.
func Each[P, R any](ctx context.Context, db DBTX, query func(*Queries, context.Context, P) ([]R, error), arg P, scan func(pgx.Rows) error) error {
	rec := record(func(q *Queries) error { _, err := query(q, context.Background(), arg); return err })
	rows, err := db.Query(ctx, rec.sql, rec.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("read a row: %w", err)
		}
	}
	return rows.Err()
}
