// Package items owns the item pipeline and its sinks: the path from an item a spider
// extracted to durable storage (the crawlq_item table, or JSON Lines objects in S3).
//
// The Pipeline group-commits items from many concurrent page jobs into batched sink
// writes with bounded memory: at most Config.MaxItems items and Config.MaxBytes bytes
// are accepted but not yet written, and a writer that finds no space waits, then gets
// ErrBackpressure, so a slow sink slows the crawl instead of growing the heap. Write
// returns only after the sink has durably written every item of the call, which is what
// lets a page job complete only after its items are safe (at-least-once). Every item
// carries a Key, unique within its run, and sinks are idempotent by (RunID, Key), so a
// retried page does not duplicate its items (the S3 sink is at-least-once; see S3Sink).
package items

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on item fields. The key is part of a btree primary key, whose entries must stay
// well under Postgres's ~2.7 kB limit; the others only guard against runaway input.
const (
	MaxKeyLen    = 1024
	MaxSpiderLen = 256
	MaxURLLen    = 32 << 10
)

// ErrInvalidItem reports an item no sink could store (empty key, Data not a JSON object,
// ...). Retrying cannot help: callers should fail the page, not retry it.
var ErrInvalidItem = errors.New("invalid item")

// Item is one record a spider extracted.
type Item struct {
	// RunID is the run the item belongs to; must be positive.
	RunID int64
	// Spider names the spider that produced the item.
	Spider string
	// Key identifies the item within its run (for example a product id or the canonical
	// URL). Re-emitting a key in the same run does not create a second item: the first
	// write wins, so a spider must derive the key from the content's identity.
	Key string
	// URL is the page the item came from.
	URL string
	// Data is the item itself: a JSON object.
	Data json.RawMessage
}

// size is what an item counts against Config.MaxBytes: every byte it holds on the heap
// that grows with input, not only Data.
func (it *Item) size() int64 {
	return int64(len(it.Data) + len(it.Key) + len(it.URL) + len(it.Spider))
}

// Validate reports why no sink could store the item, wrapping ErrInvalidItem.
func (it *Item) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w (run %d, key %.64q): %s", ErrInvalidItem, it.RunID, it.Key, fmt.Sprintf(format, args...))
	}
	if it.RunID <= 0 {
		return bad("RunID must be positive")
	}
	if it.Key == "" {
		return bad("Key is empty")
	}
	for _, f := range []struct {
		name, val string
		max       int
	}{{"Key", it.Key, MaxKeyLen}, {"Spider", it.Spider, MaxSpiderLen}, {"URL", it.URL, MaxURLLen}} {
		if len(f.val) > f.max {
			return bad("%s is %d bytes, at most %d allowed", f.name, len(f.val), f.max)
		}
		// Postgres text rejects both; failing here keeps a poison item out of shared batches.
		if !utf8.ValidString(f.val) {
			return bad("%s is not valid UTF-8", f.name)
		}
		if strings.IndexByte(f.val, 0) >= 0 {
			return bad("%s contains a NUL byte", f.name)
		}
	}
	return validateData(it.Data, bad)
}

func validateData(data json.RawMessage, bad func(string, ...any) error) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return bad("Data is not a JSON object")
	}
	if !utf8.Valid(data) {
		return bad("Data is not valid UTF-8")
	}
	if !json.Valid(data) {
		return bad("Data is not valid JSON")
	}
	// jsonb refuses \u0000 in strings. The cheap Contains keeps the token walk off the
	// common path; the walk tells a real NUL from an escaped backslash followed by "u0000".
	if bytes.Contains(data, []byte(`\u0000`)) {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			tok, err := dec.Token()
			if err != nil {
				break // json.Valid already passed, so this is the end of input
			}
			if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
				return bad("Data contains a \\u0000 escape, which Postgres jsonb cannot store")
			}
		}
	}
	return nil
}
