// Package urlstate owns what a spider that revisits (spec revisit: changed_only or adaptive)
// knows of each URL across its runs: the last answer's status and validators (ETag,
// Last-Modified), a hash of its body, the links and items (key and a hash of the fields) it
// yielded, and when it is due again. It reads the states of the pages a process starts together
// in one round trip (Loader), compares a page's items with the last ones (Diff), says when an
// adaptive page is next due (NextInterval), records a batch of pages in the transaction that
// finishes them (Batch), and sweeps the items of URLs a run no longer reached (SweepGone).
// It fetches and parses nothing: internal/crawl does, and keeps no state for a spider that
// revisits always.
package urlstate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"crawlq/internal/dbsqlc"
)

// Key names a URL's state: the spider, its line (spider.StateLine) and the canonical URL.
type Key struct {
	Spider, Line, URL string
}

// State is what a URL answered when a run of its spider's line last reached it.
type State struct {
	RunID        int64
	FetchedAt    time.Time
	Status       int
	ETag         string
	LastModified string
	BodyHash     int64
	Links        []string
	Items        map[string]string // item key -> DataHash of its fields (nil from LoadWalk)
	NItems       int               // how many items: len(Items), or LoadWalk's count
	Interval     time.Duration     // adaptive: how long after FetchedAt it is due again
}

// LoadMany returns the states of urls of the spider's line, by URL; a URL no run of the line
// reached is absent.
func LoadMany(ctx context.Context, q *dbsqlc.Queries, spider, line string, urls []string) (map[string]*State, error) {
	return load(ctx, q, spider, line, urls, func(st *State, row dbsqlc.GetURLStatesRow) error {
		if err := json.Unmarshal(row.Links, &st.Links); err != nil {
			return fmt.Errorf("links: %w", err)
		}
		if err := json.Unmarshal(row.Items, &st.Items); err != nil {
			return fmt.Errorf("items: %w", err)
		}
		st.NItems = len(st.Items)
		return nil
	})
}

// load reads the states of urls of the spider's line, by URL, each filled from its row's links
// and items by fill (LoadMany decodes both, LoadWalk cuts the links and counts the items).
func load(ctx context.Context, q *dbsqlc.Queries, spider, line string, urls []string, fill func(*State, dbsqlc.GetURLStatesRow) error) (map[string]*State, error) {
	rows, err := q.GetURLStates(ctx, dbsqlc.GetURLStatesParams{Spider: spider, Line: line, Urls: urls})
	if err != nil {
		return nil, fmt.Errorf("load url states: %w", err)
	}
	out := make(map[string]*State, len(rows))
	for _, row := range rows {
		st := &State{RunID: row.RunID, FetchedAt: row.FetchedAt, Status: int(row.Status), ETag: row.Etag,
			LastModified: row.LastModified, BodyHash: row.BodyHash, Interval: time.Duration(row.IntervalS) * time.Second}
		if err := fill(st, row); err != nil {
			return nil, fmt.Errorf("load url state of %s: %w", row.Url, err)
		}
		out[row.Url] = st
	}
	return out, nil
}

// BodyHash hashes a page's body (the first 8 bytes of its SHA-256: a collision between two
// versions of one URL is out of reach).
func BodyHash(body []byte) int64 {
	sum := sha256.Sum256(body)
	return int64(binary.LittleEndian.Uint64(sum[:8]))
}

// DataHash hashes an item's fields already encoded as JSON by encoding/json (items.Item.Data).
func DataHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Change kinds of an item against the state before a run (crawlq_item_change.change).
const (
	ChangeNew     = "new"
	ChangeChanged = "changed"
	ChangeGone    = "gone"
)

// Change is an item a page found new, changed or gone.
type Change struct {
	Key, Change string
}

// Counts are a page's (or a run's) items by change.
type Counts struct {
	New       int `json:"new"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	Gone      int `json:"gone"`
}

// Diff compares the items a page yields now (key -> hash) with those it yielded last time: the
// keys new, changed and gone, and the counts of each (unchanged included).
func Diff(old, now map[string]string) ([]Change, Counts) {
	var ch []Change
	var n Counts
	for k, h := range now {
		switch oh, ok := old[k]; {
		case !ok:
			ch = append(ch, Change{k, ChangeNew})
			n.New++
		case oh != h:
			ch = append(ch, Change{k, ChangeChanged})
			n.Changed++
		default:
			n.Unchanged++
		}
	}
	for k := range old {
		if _, ok := now[k]; !ok {
			ch = append(ch, Change{k, ChangeGone})
			n.Gone++
		}
	}
	return ch, n
}

// NextInterval is an adaptive page's next revisit interval: twice the last when the page was
// found unchanged, half when it changed, within lo..hi (a first visit starts at lo).
func NextInterval(last time.Duration, changed bool, lo, hi time.Duration) time.Duration {
	d := last
	switch {
	case d <= 0:
		d = lo
	case changed:
		d /= 2
	default:
		d *= 2
	}
	return min(max(d, lo), hi)
}

// Due reports whether an adaptive page whose state is st is due to be fetched at now.
func (st *State) Due(now time.Time) bool {
	return st.Interval <= 0 || !now.Before(st.FetchedAt.Add(st.Interval))
}

// SweepGone records as gone, for run, the items of the line's URLs that no run since an earlier
// one reached, and clears them from the state; it returns how many. Call it once the run has
// reached everything it could (a run with dead pages or cancelled must not: its unreached pages
// may still be there). A second call finds nothing.
func SweepGone(ctx context.Context, q *dbsqlc.Queries, spider, line string, run int64) (int64, error) {
	r, err := q.SweepGoneItems(ctx, dbsqlc.SweepGoneItemsParams{Spider: spider, Line: line, RunID: run})
	if err != nil {
		return 0, fmt.Errorf("sweep gone items of run %d: %w", run, err)
	}
	return r.Gone, nil
}

// Expire removes up to max URL states that were kept past their keep_until (the spider's
// state_ttl after the last run that reached them); it returns how many.
func Expire(ctx context.Context, q *dbsqlc.Queries, now time.Time, max int) (int64, error) {
	n, err := q.DeleteExpiredURLStates(ctx, dbsqlc.DeleteExpiredURLStatesParams{Now: now, MaxRows: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("expire url states: %w", err)
	}
	return n, nil
}

// ItemChange is one item a run found new, changed or gone, with the URL of its page.
type ItemChange struct {
	Key    string `json:"key"`
	Change string `json:"change"`
	URL    string `json:"url"`
}

// Changes lists up to max of run's item changes after (afterChange, afterKey), by change then
// key.
func Changes(ctx context.Context, q *dbsqlc.Queries, run int64, afterChange, afterKey string, max int) ([]ItemChange, error) {
	rows, err := q.ListItemChanges(ctx, dbsqlc.ListItemChangesParams{RunID: run, AfterChange: afterChange, AfterKey: afterKey, MaxRows: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("list item changes of run %d: %w", run, err)
	}
	out := make([]ItemChange, len(rows))
	for i, r := range rows {
		out[i] = ItemChange{Key: r.Key, Change: r.Change, URL: r.Url}
	}
	return out, nil
}
