package crawl

import (
	"cmp"
	"context"
	"fmt"

	"crawlq/internal/spider"
)

// Items a spider yields are stored by key, the first of each key in a run: an item with no key
// (or without another required field) is dropped by the spider, and one whose key an earlier
// item of the run had is not stored (the spider drops a repeat on its page; the sink keeps a
// key's first write). A key that does not tell items apart (an author shared by many posts) thus
// collapses them silently unless counted: each such item is counted in the run's errors_by_kind,
// by why it was not stored, and the first of each kind in a run is said in its log with an
// example, so `crawlq run` and `crawlq logs` show what `crawlq spider test` shows for one page.
// Not errors: the page and the run go on.
const (
	kindNoKey     = "items_dropped_no_key"        // an item without its key
	kindNoField   = "items_dropped_missing_field" // an item without another required field
	kindDuplicate = "items_duplicate_key"         // an item whose key an earlier item of the run had
)

// itemLoss counts a page's items not stored, by why.
type itemLoss struct{ noKey, noField, duplicate int }

type kindCount struct {
	kind string
	n    int
}

// kinds returns the counts that are not zero, as stat kinds.
func (l itemLoss) kinds() []kindCount {
	var out []kindCount
	for _, k := range []kindCount{{kindNoKey, l.noKey}, {kindNoField, l.noField}, {kindDuplicate, l.duplicate}} {
		if k.n > 0 {
			out = append(out, k)
		}
	}
	return out
}

// itemsLost counts the items the spider dropped on the page at url of run runID, and says the
// first of each kind in the run's log (and this process's), with the page and the field.
func (c *Crawler) itemsLost(ctx context.Context, runID int64, url string, res spider.Result) itemLoss {
	var l itemLoss
	var noKey, noField *spider.Dropped
	for i, d := range res.Dropped {
		if d.Key {
			l.noKey++
			noKey = cmp.Or(noKey, &res.Dropped[i])
		} else {
			l.noField++
			noField = cmp.Or(noField, &res.Dropped[i])
		}
	}
	// A spider that reports only counts (no Dropped list) has them all as missing a field.
	if n := res.Stats.Dropped - len(res.Dropped); n > 0 {
		l.noField += n
	}
	l.duplicate = res.Stats.Duplicates
	if noKey != nil && c.itemNotes.first(itemNote{runID, kindNoKey}) {
		c.noteItems(ctx, runID, fmt.Sprintf("items dropped: items[%d] match %d on %s has no key (%s): not stored; each such item is counted as %s",
			noKey.Rule, noKey.Container, url, noKey.Field, kindNoKey))
	}
	if noField != nil && c.itemNotes.first(itemNote{runID, kindNoField}) {
		c.noteItems(ctx, runID, fmt.Sprintf("items dropped: items[%d] match %d on %s has no %s, a required field: not stored; each such item is counted as %s",
			noField.Rule, noField.Container, url, noField.Field, kindNoField))
	}
	if l.duplicate > 0 && c.itemNotes.first(itemNote{runID, kindDuplicate}) {
		c.noteItems(ctx, runID, fmt.Sprintf("items not stored: %d item(s) on %s repeat the key of an earlier item on the page (the first is kept); each such item of the run is counted as %s: is the spider's item key unique?",
			l.duplicate, url, kindDuplicate))
	}
	return l
}

// duplicateItems says, once run runID finished, that n of its items were not stored because an
// earlier item of the run, on another page, had their key, with an example from its sink.
func (c *Crawler) duplicateItems(ctx context.Context, runID int64, n int64) {
	line := fmt.Sprintf("items not stored: %d item(s) had the key of an earlier item of the run from another page (the first is kept), counted as %s: is the spider's item key unique?", n, kindDuplicate)
	if c.cfg.DuplicateKey != nil {
		key, urls, err := c.cfg.DuplicateKey(ctx, runID)
		switch {
		case err != nil:
			c.log.Warn("could not find an example of a run's duplicate item keys", "run", runID, "err", err)
		case key != "":
			line += fmt.Sprintf(" E.g. key %q, from %v", key, urls)
		}
	}
	c.noteItems(ctx, runID, line)
}

func (c *Crawler) noteItems(ctx context.Context, runID int64, line string) {
	c.log.Warn(line, "run", runID)
	c.pageLog().Note(ctx, runID, c.clk.Now(), line)
}

// itemNote is a kind of item loss said in a run's log.
type itemNote struct {
	run  int64
	kind string
}
