package items

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
)

// MaxListLimit bounds ListItems, so one API call cannot pull a whole run into memory.
const MaxListLimit = 10000

// PostgresSink writes items to the crawlq_item table, idempotently by (run_id, key). Its queries
// are in internal/dbsqlc/crawlq_item.sql.
type PostgresSink struct {
	pool *pgxpool.Pool
}

// NewPostgresSink returns a sink writing to crawlq_item through pool.
func NewPostgresSink(pool *pgxpool.Pool) Sink { return &PostgresSink{pool: pool} }

// Name implements Sink.
func (s *PostgresSink) Name() string { return "postgres" }

// TxSink is a sink that can also write inside the caller's transaction. The crawl uses it to
// write a page's items in the same transaction that completes the page, so items and completion
// commit together (exactly once) and no separate commit is spent on them.
type TxSink interface {
	Sink
	// WriteBatch validates batch (Item.Validate) and queues its insert on b, which the caller
	// sends with its own statements in one round trip. When the database refuses the items for
	// what they hold, reading b's results returns an error wrapping ErrInvalidItem.
	WriteBatch(b Batch, batch []Item) error
}

// Batch is where WriteBatch queues its statement: a *pgx.Batch, or a type with its Queue method
// (queue.Tx, which sends it in the transaction that completes the crawl's pages).
type Batch = dbsqlc.Queuer

// Write inserts batch in one statement (one round trip, one implicit transaction, so a
// batch is all or nothing); items already present are skipped.
func (s *PostgresSink) Write(ctx context.Context, batch []Item) error {
	if len(batch) == 0 {
		return nil
	}
	return insertError(len(batch), dbsqlc.New(s.pool).InsertItems(ctx, itemParams(batch)))
}

// WriteBatch implements TxSink.
func (s *PostgresSink) WriteBatch(b Batch, batch []Item) error {
	for i := range batch {
		if err := batch[i].Validate(); err != nil {
			return err
		}
	}
	if len(batch) == 0 {
		return nil
	}
	dbsqlc.QueueExec(b, (*dbsqlc.Queries).InsertItems, itemParams(batch)).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return insertError(len(batch), err)
	}
	return nil
}

// itemParams returns the parameters of InsertItems for batch: parallel arrays, one element per
// item.
func itemParams(batch []Item) dbsqlc.InsertItemsParams {
	runIDs := make([]int64, len(batch))
	keys := make([]string, len(batch))
	spiders := make([]string, len(batch))
	urls := make([]string, len(batch))
	data := make([]string, len(batch))
	for i := range batch {
		it := &batch[i]
		runIDs[i], keys[i], spiders[i], urls[i], data[i] = it.RunID, it.Key, it.Spider, it.URL, string(it.Data)
	}
	return dbsqlc.InsertItemsParams{RunIds: runIDs, Keys: keys, Spiders: spiders, Urls: urls, Data: data}
}

// insertError wraps the error of inserting n items, marking what no retry can fix.
func insertError(n int, err error) error {
	switch {
	case err == nil:
		return nil
	case rejectsData(err):
		return fmt.Errorf("insert %d items: %w: %w", n, ErrInvalidItem, err)
	default:
		return fmt.Errorf("insert %d items: %w", n, err)
	}
}

// rejectsData reports whether Postgres refused the batch for what it holds (a data
// exception such as a number too large for jsonb, or a CHECK or NOT NULL violation),
// which no retry can fix. Item.Validate catches most such input before it gets here.
func rejectsData(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "22") || pgErr.Code == "23502" || pgErr.Code == "23514"
}

// CountItems returns how many items run runID has.
func CountItems(ctx context.Context, pool *pgxpool.Pool, runID int64) (int64, error) {
	n, err := dbsqlc.New(pool).CountRunItems(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("count items of run %d: %w", runID, err)
	}
	return n, nil
}

// DuplicateFinder is a sink that can show a key a run's items repeated.
type DuplicateFinder interface {
	// DuplicateKey returns a key that more than one item of run runID was written with, and the
	// URLs of its first two ("" when no key repeats).
	DuplicateKey(ctx context.Context, runID int64) (string, []string, error)
}

// DuplicateKey implements DuplicateFinder: the sink keeps the first item of a key.
func (s *PostgresSink) DuplicateKey(ctx context.Context, runID int64) (string, []string, error) {
	row, err := dbsqlc.New(s.pool).RunDuplicateKey(ctx, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("duplicate item key of run %d: %w", runID, err)
	}
	return row.Key, row.Urls, nil
}

// Counter is a sink that can say how many distinct items a run holds in it.
type Counter interface {
	CountRun(ctx context.Context, runID int64) (int64, error)
}

// CountRun implements Counter: items are keyed by run and key, so this is the number of distinct
// items, however often pages were retried or reached under other URLs.
func (s *PostgresSink) CountRun(ctx context.Context, runID int64) (int64, error) {
	return CountItems(ctx, s.pool, runID)
}

// ListItems returns up to limit (1..MaxListLimit) items of run runID in key order.
func ListItems(ctx context.Context, pool *pgxpool.Pool, runID int64, limit int) ([]Item, error) {
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("list items of run %d: limit %d: must be between 1 and %d", runID, limit, MaxListLimit)
	}
	rows, err := dbsqlc.New(pool).ListRunItems(ctx, dbsqlc.ListRunItemsParams{RunID: runID, MaxItems: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list items of run %d: %w", runID, err)
	}
	items := make([]Item, len(rows))
	for i, r := range rows {
		items[i] = Item{RunID: r.RunID, Spider: r.Spider, Key: r.Key, URL: r.Url, Data: json.RawMessage(r.Data)}
	}
	return items, nil
}

// ListItemsAfter returns up to limit items of a run in key order after the key after ("" for the
// first): keyset pagination, so a caller reads every item of a run of any size one page at a
// time. Spider is not set.
func ListItemsAfter(ctx context.Context, pool *pgxpool.Pool, runID int64, after string, limit int) ([]Item, error) {
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("list items of run %d: limit %d: must be between 1 and %d", runID, limit, MaxListLimit)
	}
	rows, err := dbsqlc.New(pool).ListRunItemsAfter(ctx, dbsqlc.ListRunItemsAfterParams{RunID: runID, After: after, MaxItems: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list items of run %d after %q: %w", runID, after, err)
	}
	items := make([]Item, len(rows))
	for i, r := range rows {
		items[i] = Item{RunID: runID, Key: r.Key, URL: r.Url, Data: json.RawMessage(r.Data)}
	}
	return items, nil
}

// EachItem hands fn every item of a run in key order, read with one streamed statement: the run's
// items are sorted once (they are stored a batch to a row, so reading a large run page by page
// would sort what is left of it once a page), and memory is one item. The Item is valid only
// while fn runs. An error of fn stops the read and is returned (errors.Is finds it).
func EachItem(ctx context.Context, pool *pgxpool.Pool, runID int64, fn func(Item) error) error {
	it := Item{RunID: runID}
	var data []byte
	err := dbsqlc.Each(ctx, pool, (*dbsqlc.Queries).ListAllRunItems, runID, func(rows pgx.Rows) error {
		if err := rows.Scan(&it.Key, &it.URL, &data); err != nil {
			return err
		}
		it.Data = data
		return fn(it)
	})
	if err != nil {
		return fmt.Errorf("read items of run %d: %w", runID, err)
	}
	return nil
}
