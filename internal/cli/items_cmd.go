package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/urlstate"
	"crawlq/internal/view"
)

// itemsPage is how many item changes crawlq items --changes holds at once: it reads them a page at
// a time (keyset pagination), so memory does not grow with the run.
const itemsPage = 1000

func itemsCmd() *Command {
	return &Command{
		Name: "items", Synopsis: "export a run's items (JSON Lines or CSV)", Usage: "RUN_ID [--changes] [--format jsonl|csv] [--output FILE] [--limit N]", Args: one("RUN_ID"),
		Help: `Exports every item a run wrote to the Postgres sink, in key order: all of them, however many
(--limit N stops after N). The run's items are read with one streamed statement and written out
as they come, so memory stays bounded for a run of millions of items.

--format jsonl (the default) prints one JSON object per line: {"key","url","data"}.
--format csv prints a header, then a row per item: key, url, then each field found in the
run's items (sorted by name; a string as it is, another value as JSON, a missing or null
field empty). A field named key or url is headed data.key or data.url.
--output FILE writes to FILE instead of standard output: to FILE.partial first, renamed to
FILE once every item is written, so FILE is never a cut-short export (on an error the partial
file is removed and the exit status is 1).

--changes lists, instead of its items, the items the run found new, changed or gone against the
URL state before it (a spider with revisit: changed_only or adaptive; docs/recrawl.md), by change
then key: {"key","change","url"} per line, or CSV key,change,url. The counts, unchanged items
included, are in crawlq run ID's stats (changes).

Items of a run still running are the ones stored so far. An unknown run is an error (exit
status 1).`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			limit := fs.Int64("limit", 0, "at most this many items (0: every item)")
			format := fs.String("format", "jsonl", "jsonl or csv")
			output := fs.String("output", "", "write to this file instead of standard output")
			changes := fs.Bool("changes", false, "list the items the run found new, changed or gone instead of its items")
			return func(ctx context.Context, args []string) error {
				if *limit < 0 {
					return usageErr("--limit must not be negative, got %d", *limit)
				}
				if *format != "jsonl" && *format != "csv" {
					return usageErr("--format %q: want jsonl or csv", *format)
				}
				id, err := parseRunID(args)
				if err != nil {
					return err
				}
				return pg.withNode(ctx, "", func(n *node.Node) error {
					// An unknown run is an error, as for crawlq run, not an empty list.
					if _, err := n.Crawler.Get(ctx, id); err != nil {
						return err
					}
					export := exportItems
					if *changes {
						export = exportChanges
					}
					if *output == "" {
						w := bufio.NewWriterSize(env.Stdout, 64<<10)
						if err := export(ctx, n, w, id, *format, *limit); err != nil {
							return err
						}
						return w.Flush()
					}
					return writeFileWhole(*output, func(w io.Writer) error { return export(ctx, n, w, id, *format, *limit) })
				})
			}
		},
	}
}

// writeFileWhole writes path through write: to path.partial, renamed to path once write and the
// file's sync and close all succeeded, and removed otherwise.
func writeFileWhole(path string, write func(io.Writer) error) (err error) {
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 64<<10)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil { // the rename survives a crash
		d.Sync()
		d.Close()
	}
	return nil
}

// exportItems writes run id's items to w in format, in key order, up to limit (0: all).
func exportItems(ctx context.Context, n *node.Node, w io.Writer, id int64, format string, limit int64) error {
	var row func(items.Item) error
	var cw *csv.Writer
	switch format {
	case "csv":
		fields, err := itemFields(ctx, n, id)
		if err != nil {
			return err
		}
		cw = csv.NewWriter(w)
		if err := cw.Write(csvHeader(fields)); err != nil {
			return err
		}
		rec := make([]string, 2+len(fields))
		row = func(it items.Item) error {
			var data map[string]json.RawMessage
			if err := json.Unmarshal(it.Data, &data); err != nil {
				return fmt.Errorf("item %q of run %d: %w", it.Key, id, err)
			}
			rec[0], rec[1] = it.Key, it.URL
			for i, f := range fields {
				rec[2+i] = csvValue(data[f])
			}
			return cw.Write(rec)
		}
	default:
		e := json.NewEncoder(w) // JSON Lines: one compact object per line
		row = func(it items.Item) error { return e.Encode(view.Item{Key: it.Key, URL: it.URL, Data: it.Data}) }
	}
	pool := n.Queue.Pool()
	if limit > 0 && limit <= items.MaxListLimit {
		// A few items: one statement whose LIMIT the server sorts for (a top-N sort).
		its, err := items.ListItemsAfter(ctx, pool, id, "", int(limit))
		if err != nil {
			return err
		}
		for _, it := range its {
			if err := row(it); err != nil {
				return err
			}
		}
	} else {
		// Every item (or more than a page): streamed, the run sorted once, one item held.
		var sent int64
		err := items.EachItem(ctx, pool, id, func(it items.Item) error {
			if limit > 0 && sent == limit {
				return errEnoughItems
			}
			sent++
			return row(it)
		})
		if err != nil && !errors.Is(err, errEnoughItems) {
			return err
		}
	}
	if cw != nil {
		if cw.Flush(); cw.Error() != nil {
			return cw.Error()
		}
	}
	return nil
}

// errEnoughItems stops a streamed read at the items asked for.
var errEnoughItems = errors.New("enough items")

// exportChanges writes run id's item changes to w in format, up to limit (0: all), a page at a
// time.
func exportChanges(ctx context.Context, n *node.Node, w io.Writer, id int64, format string, limit int64) error {
	var cw *csv.Writer
	e := json.NewEncoder(w)
	if format == "csv" {
		cw = csv.NewWriter(w)
		if err := cw.Write([]string{"key", "change", "url"}); err != nil {
			return err
		}
	}
	q := dbsqlc.New(n.Queue.Pool())
	var sent int64
	afterChange, afterKey := "", ""
	for limit == 0 || sent < limit {
		page := int64(itemsPage)
		if limit > 0 {
			page = min(page, limit-sent)
		}
		chs, err := urlstate.Changes(ctx, q, id, afterChange, afterKey, int(page))
		if err != nil {
			return err
		}
		for _, c := range chs {
			if cw != nil {
				err = cw.Write([]string{c.Key, c.Change, c.URL})
			} else {
				err = e.Encode(c)
			}
			if err != nil {
				return err
			}
		}
		sent += int64(len(chs))
		if cw != nil {
			if cw.Flush(); cw.Error() != nil {
				return cw.Error()
			}
		}
		if int64(len(chs)) < page {
			break
		}
		afterChange, afterKey = chs[len(chs)-1].Change, chs[len(chs)-1].Key
	}
	return nil
}

// itemFields lists the fields found in a run's items, sorted: the CSV's columns after key and url.
func itemFields(ctx context.Context, n *node.Node, id int64) ([]string, error) {
	rows, err := dbsqlc.New(n.Queue.Pool()).RunFieldCoverage(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("fields of run %d's items: %w", id, err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Field
	}
	slices.Sort(out)
	return out, nil
}

// csvHeader is the CSV header of items with fields: key, url, then the fields, one column per
// name: a field named like a column before it (an item's own url field) is data.NAME, its path in
// the JSON Lines export ({"key","url","data"}).
func csvHeader(fields []string) []string {
	head := []string{"key", "url"}
	for _, f := range fields {
		for slices.Contains(head, f) {
			f = "data." + f
		}
		head = append(head, f)
	}
	return head
}

// csvValue is a field's CSV cell: a string as it is, null or missing empty, anything else as JSON.
func csvValue(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	if v[0] == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			return s
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}
