package api

import (
	"context"
	"strings"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/urlstate"
)

// listChanges answers a run's item changes against the URL state before it (a spider that
// revisits: docs/recrawl.md): a page of its new, changed and gone items by change then key, from
// after (the last answer's next), with the run's counts (unchanged ones too: they are only
// counted) and the next page's cursor, "" after the last.
func (a *API) listChanges(ctx context.Context, r *Request) (Response, error) {
	run, err := a.requestedRun(ctx, r)
	if err != nil {
		return nil, err
	}
	limit := r.Limit
	if limit == 0 {
		limit = 100
	}
	afterChange, afterKey, _ := strings.Cut(r.After, "/") // a change has no "/"; a key may
	chs, err := urlstate.Changes(ctx, dbsqlc.New(a.cfg.Crawler.Pool()), run.ID, afterChange, afterKey, limit)
	if err != nil {
		return nil, err
	}
	if chs == nil {
		chs = []urlstate.ItemChange{}
	}
	next := ""
	if len(chs) == limit {
		last := chs[len(chs)-1]
		next = last.Change + "/" + last.Key
	}
	return Response{"changes": chs, "counts": run.Stats.Changes, "next": next}, nil
}
