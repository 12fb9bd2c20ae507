package urlstate

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"crawlq/internal/dbsqlc"
)

// Expected change: how likely an adaptive URL changed since its last fetch, the order in which a
// run asks its pages. The adaptive interval halves when a page is found changed and doubles when
// it is not (NextInterval), so it settles where a page checked once an interval is found changed
// about half the time: it is the page's half-life. A page whose changes come at random (a Poisson
// process) at that pace changed since its last fetch, t ago, with probability 1 - 2^(-t/interval):
// 0.5 when it is just due, 0.75 at twice its interval, below 0.5 while it is not due. A URL with
// no estimate (no state, its last answer was not a page, no interval) counts as changed (1): it
// is new, or its answer is unknown.

// Due is what a URL's expected change is read from: a part of its State.
type Due struct {
	FetchedAt time.Time
	Status    int
	Interval  time.Duration
}

// LoadDue returns the Due of urls of the spider's line, by URL; a URL no run of the line reached
// is absent. It reads only those columns (GetURLDue), not the links and items LoadMany decodes.
func LoadDue(ctx context.Context, q *dbsqlc.Queries, spider, line string, urls []string) (map[string]Due, error) {
	rows, err := q.GetURLDue(ctx, dbsqlc.GetURLDueParams{Spider: spider, Line: line, Urls: urls})
	if err != nil {
		return nil, fmt.Errorf("load url due times: %w", err)
	}
	out := make(map[string]Due, len(rows))
	for _, r := range rows {
		out[r.Url] = Due{FetchedAt: r.FetchedAt, Status: int(r.Status), Interval: time.Duration(r.IntervalS) * time.Second}
	}
	return out, nil
}

// ExpectedChange is the probability, 0..1, that the URL whose Due is d changed by now (see the top
// of this file); known: whether any run of the line reached it.
func ExpectedChange(d Due, known bool, now time.Time) float64 {
	if !known || d.Status != http.StatusOK || d.Interval <= 0 {
		return 1
	}
	t := now.Sub(d.FetchedAt)
	if t <= 0 {
		return 0
	}
	return 1 - math.Exp2(-float64(t)/float64(d.Interval))
}
