package urlstate

import (
	"encoding/json"
	"fmt"
	"time"

	"crawlq/internal/dbsqlc"
)

// Page is what one finished page records: its URL's new state, and its items' changes.
type Page struct {
	Key   Key
	RunID int64
	// Fetched: the page was requested now (an adaptive page not yet due was not: FetchedAt is
	// kept).
	Fetched bool
	// Same: the page is as it was (a 304, the same body, an adaptive page not due): only its run,
	// times, validators and interval are written, its links and items are kept.
	Same         bool
	FetchedAt    time.Time
	Keep         time.Duration // how long the state is kept if no run reaches it again (state_ttl)
	Status       int
	ETag         string
	LastModified string
	BodyHash     int64
	Links        []string
	Items        map[string]string
	Interval     time.Duration
	Changes      []Change
	Counts       Counts
	// Kind, with Same: the page's outcome (one page of this kind, Bytes) is added to its run's
	// stats with its record, and only if its record is written (see Batch), so a page found as it
	// was counts once in a run however many times it was asked. Walked: it was asked inside
	// another page's job, having no job of its own (internal/crawl's walks; counted as kind
	// walked too).
	Kind   string
	Bytes  int64
	Walked bool
}

// Batch gathers the pages that finish in one transaction, for a statement or two. Each record claims
// its URL for its run: a URL that a run has recorded already is not written again, and its
// counts, changes and page outcome are not added (so a URL reached twice in a run, by its own
// job and within another's, counts once).
type Batch struct {
	recs []record
	at   map[Key]int // index in recs: a URL recorded twice in a batch keeps the last
}

// record is what a batch writes of one URL: its state, or a touch of a page as it was.
type record struct {
	state   *stateJSON
	touch   *touchJSON
	changes []changeJSON
}

// touchJSON is a touch as RecordURLStates reads it: a touchRow with what TouchURLStates takes
// once per statement (encoding/json flattens the embedded row's fields).
type touchJSON struct {
	Spider string `json:"spider"`
	Line   string `json:"line"`
	RunID  int64  `json:"run_id"`
	touchRow
}

type stateJSON struct {
	Spider       string            `json:"spider"`
	Line         string            `json:"line"`
	URL          string            `json:"url"`
	RunID        int64             `json:"run_id"`
	Fetched      bool              `json:"fetched"`
	FetchedAt    time.Time         `json:"fetched_at"`
	KeepS        float64           `json:"keep_s"`
	Status       int               `json:"status"`
	ETag         string            `json:"etag"`
	LastModified string            `json:"last_modified"`
	BodyHash     int64             `json:"body_hash"`
	Links        []string          `json:"links"`
	Items        map[string]string `json:"items"`
	IntervalS    int64             `json:"interval_s"`
	New          int               `json:"n_new"`
	Changed      int               `json:"n_changed"`
	Unchanged    int               `json:"n_unchanged"`
	Gone         int               `json:"n_gone"`
}

type changeJSON struct {
	RunID  int64  `json:"run_id"`
	Key    string `json:"key"`
	Change string `json:"change"`
	URL    string `json:"url"`
}

// Add adds a page to the batch.
func (b *Batch) Add(p *Page) {
	if b.at == nil {
		b.at = map[Key]int{}
	}
	var r record
	if p.Same {
		r.touch = &touchJSON{Spider: p.Key.Spider, Line: p.Key.Line, RunID: p.RunID, touchRow: touchRow{URL: p.Key.URL,
			Fetched: p.Fetched, KeepS: p.Keep.Seconds(), ETag: p.ETag, LastModified: p.LastModified,
			IntervalS: int64(p.Interval / time.Second), Unchanged: p.Counts.Unchanged, Kind: p.Kind, Bytes: p.Bytes, Walked: p.Walked}}
	} else {
		links, items := p.Links, p.Items
		if links == nil {
			links = []string{}
		}
		if items == nil {
			items = map[string]string{}
		}
		r.state = &stateJSON{Spider: p.Key.Spider, Line: p.Key.Line, URL: p.Key.URL, RunID: p.RunID, Fetched: p.Fetched,
			FetchedAt: p.FetchedAt, KeepS: p.Keep.Seconds(), Status: p.Status, ETag: p.ETag, LastModified: p.LastModified,
			BodyHash: p.BodyHash, Links: links, Items: items, IntervalS: int64(p.Interval / time.Second),
			New: p.Counts.New, Changed: p.Counts.Changed, Unchanged: p.Counts.Unchanged, Gone: p.Counts.Gone}
	}
	for _, c := range p.Changes {
		r.changes = append(r.changes, changeJSON{RunID: p.RunID, Key: c.Key, Change: c.Change, URL: p.Key.URL})
	}
	if i, ok := b.at[p.Key]; ok {
		b.recs[i] = r
	} else {
		b.at[p.Key] = len(b.recs)
		b.recs = append(b.recs, r)
	}
}

// Len is how many URLs the batch records.
func (b *Batch) Len() int { return len(b.recs) }

// Stat kinds the item counts are added to a run's stats as (its errors_by_kind).
const (
	KindNew       = "items_new"
	KindChanged   = "items_changed"
	KindUnchanged = "items_unchanged"
	KindGone      = "items_gone"
)

// Queue queues the batch's statements on q (the transaction that finishes its pages): one for
// the pages of each run found as they were (touches, TouchURLStates), and one for the rest
// (pages parsed or ended, and their item changes: RecordURLStates), when there are any; now is
// when its pages were fetched, and their states are kept their spider's state_ttl from it.
func (b *Batch) Queue(q dbsqlc.Queuer, now time.Time) error {
	var rest []record
	touches := map[touchGroup][]touchRow{}
	var order []touchGroup
	for _, r := range b.recs {
		if r.touch == nil || len(r.changes) > 0 {
			rest = append(rest, r)
			continue
		}
		t := r.touch
		g := touchGroup{t.Spider, t.Line, t.RunID}
		if _, ok := touches[g]; !ok {
			order = append(order, g)
		}
		touches[g] = append(touches[g], t.touchRow)
	}
	for _, g := range order {
		dbsqlc.QueueExec(q, (*dbsqlc.Queries).TouchURLStates, touchParams(g, touches[g], now))
	}
	if len(rest) == 0 {
		return nil
	}
	return queueRecords(q, rest, now)
}

// touchRow is what differs between the touches of one TouchURLStates.
type touchRow struct {
	URL          string  `json:"url"`
	Fetched      bool    `json:"fetched"`
	KeepS        float64 `json:"keep_s"`
	ETag         string  `json:"etag"`
	LastModified string  `json:"last_modified"`
	IntervalS    int64   `json:"interval_s"`
	Unchanged    int     `json:"unchanged"`
	Kind         string  `json:"kind"`
	Bytes        int64   `json:"bytes"`
	Walked       bool    `json:"walked"`
}

// touchParams returns the TouchURLStates arguments for rows of group g: a column an argument.
func touchParams(g touchGroup, rows []touchRow, now time.Time) dbsqlc.TouchURLStatesParams {
	n := len(rows)
	p := dbsqlc.TouchURLStatesParams{RunID: g.run, Spider: g.spider, Line: g.line, Now: now,
		Urls: make([]string, n), Fetched: make([]bool, n), KeepS: make([]float64, n), Etags: make([]string, n),
		LastModified: make([]string, n), IntervalS: make([]int32, n), Unchanged: make([]int32, n),
		Kinds: make([]string, n), Bytes: make([]int64, n), Walked: make([]bool, n)}
	for i, r := range rows {
		p.Urls[i], p.Fetched[i], p.KeepS[i], p.Etags[i], p.LastModified[i] = r.URL, r.Fetched, r.KeepS, r.ETag, r.LastModified
		p.IntervalS[i], p.Unchanged[i], p.Kinds[i], p.Bytes[i], p.Walked[i] = int32(r.IntervalS), int32(r.Unchanged), r.Kind, r.Bytes, r.Walked
	}
	return p
}

// touchGroup is what the touches of one statement share.
type touchGroup struct {
	spider, line string
	run          int64
}

// queueRecords queues RecordURLStates for recs: the pages that are not plain touches.
func queueRecords(q dbsqlc.Queuer, recs []record, now time.Time) error {
	runSet := map[int64]bool{}
	changes := []changeJSON{}
	sts, tcs := []*stateJSON{}, []*touchJSON{}
	for _, r := range recs {
		changes = append(changes, r.changes...)
		if r.touch != nil {
			tcs = append(tcs, r.touch)
			runSet[r.touch.RunID] = true
		} else {
			sts = append(sts, r.state)
			runSet[r.state.RunID] = true
		}
	}
	runs := make([]int64, 0, len(runSet))
	for run := range runSet {
		runs = append(runs, run)
	}
	states, err := json.Marshal(sts)
	if err != nil {
		return fmt.Errorf("record url states: %w", err)
	}
	touches, err := json.Marshal(tcs)
	if err != nil {
		return fmt.Errorf("record url states: %w", err)
	}
	chs, err := json.Marshal(changes)
	if err != nil {
		return fmt.Errorf("record url states: %w", err)
	}
	rs, err := json.Marshal(runs)
	if err != nil {
		return fmt.Errorf("record url states: %w", err)
	}
	// Sent as text and cast there, so the driver needs no jsonb codec (as items are).
	p := dbsqlc.RecordURLStatesParams{States: string(states), Touches: string(touches), Changes: string(chs), Runs: string(rs), Now: now}
	dbsqlc.QueueExec(q, (*dbsqlc.Queries).RecordURLStates, p)
	return nil
}

// CountsOf reads a run's item counts from its stats' kinds (errors_by_kind), or nil when it
// counted none (its spider keeps no URL state: every batch of one that does adds KindUnchanged).
func CountsOf(byKind map[string]int64) *Counts {
	for _, k := range []string{KindNew, KindChanged, KindUnchanged, KindGone} {
		if _, ok := byKind[k]; ok {
			return &Counts{New: int(byKind[KindNew]), Changed: int(byKind[KindChanged]), Unchanged: int(byKind[KindUnchanged]), Gone: int(byKind[KindGone])}
		}
	}
	return nil
}
