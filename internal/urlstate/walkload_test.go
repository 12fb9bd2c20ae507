package urlstate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/dbtest"
)

// decodeStrings and countKeys read what encoding/json reads, in every spelling: Postgres' own
// and any other, escapes, non-ASCII, and errors where encoding/json has one (countKeys, which
// reads Postgres' valid JSON, where its brackets or strings do not close).
func TestWalkDecodersAgreeWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[]`, ` [ ] `, `["http://a.test/1"]`, `["http://a.test/1", "http://a.test/2"]`, `["a","b" , "c"]`,
		`["http://a.test/é", "http://a.test/\u00e9"]`, `["a\"b", "c\\d", "e\/f", "\ud83d\ude00"]`, "[\"a\tb\"]", "[\"\xff\"]",
		`["a",]`, `["a" "b"]`, `["a"] x`, `[1]`, `[null]`, `null`, `{}`, ``, `[`, `["a`, `["a"`,
	} {
		var want []string
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := decodeStrings([]byte(in))
		if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("decodeStrings(%q) = %q, %v; encoding/json: %q, %v", in, got, err, want, wantErr)
		}
	}
	for _, in := range []string{
		`{}`, ` { } `, `{"CQ-1": "d017eaf91de7801d"}`, `{"a": "1", "b": "2", "c": "3"}`, `{"a:b": "1:2", "c\"d:": "e"}`,
		`{"a": {"b": "1", "c": [1, {"d": 2}]}, "e": "f"}`, `{"\\": ":"}`, `{"é": "ü"}`,
		`[]`, `null`, ``, `{`, `{"a": "1"`, `{"a": "1"}}`, `{"a": "1`, `{"a": ["1"}`,
	} {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := countKeys([]byte(in))
		if (err != nil) != (wantErr != nil) && !(wantErr == nil && want == nil) || err == nil && got != len(want) {
			t.Errorf("countKeys(%q) = %d, %v; encoding/json: %d keys, %v", in, got, err, len(want), wantErr)
		}
	}
}

// A walk's read of the states is LoadMany's but for the items, whose number it has instead.
func TestLoadWalkReadsWhatLoadManyReads(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	links := []string{"http://a.test/\"quoted\"", "http://a.test/é", "http://a.test/back\\slash", "http://a.test/plain"}
	pages := []*Page{
		{Key: Key{"s", "l", "http://a.test/1"}, RunID: 1, Fetched: true, Keep: time.Hour, Status: 200, ETag: `"e1"`,
			LastModified: "Thu, 01 Jan 2026 00:00:00 GMT", BodyHash: 42, Links: links,
			Items: map[string]string{"k:1": "h1", "k\"2": "h2", "k3": "h3"}},
		{Key: Key{"s", "l", "http://a.test/2"}, RunID: 1, Fetched: true, Keep: time.Hour, Status: 404},
	}
	sendBatch(t, ctx, pool, pages)
	q := dbsqlc.New(pool)
	urls := []string{"http://a.test/1", "http://a.test/2", "http://a.test/none"}
	many, err := LoadMany(ctx, q, "s", "l", urls)
	if err != nil {
		t.Fatal(err)
	}
	walk, err := LoadWalk(ctx, q, "s", "l", urls)
	if err != nil {
		t.Fatal(err)
	}
	if len(walk) != 2 || walk["http://a.test/none"] != nil {
		t.Fatalf("LoadWalk = %v; want the two URLs with a state", walk)
	}
	for u, m := range many {
		w := walk[u]
		if w == nil || w.Items != nil || w.NItems != len(m.Items) || m.NItems != len(m.Items) {
			t.Errorf("%s: LoadWalk %+v, LoadMany %+v; want no items and their number", u, w, m)
			continue
		}
		w.Items, w.NItems = m.Items, m.NItems
		if fmt.Sprintf("%+v", *w) != fmt.Sprintf("%+v", *m) {
			t.Errorf("%s: LoadWalk %+v, LoadMany %+v", u, *w, *m)
		}
	}
	if w := walk["http://a.test/1"]; w == nil || !reflect.DeepEqual(w.Links, links) || w.NItems != 3 {
		t.Errorf("LoadWalk of the page: %+v; want its links %q and 3 items", w, links)
	}
}

// BenchmarkDecodeWalkState decodes a demo-site page's stored links and items as LoadMany does
// (encoding/json) and as LoadWalk does.
func BenchmarkDecodeWalkState(b *testing.B) {
	links := []byte(`["http://127.0.0.1:8090/catalogue/item-40.html", "http://127.0.0.1:8090/catalogue/item-41.html", "http://127.0.0.1:8090/catalogue/item-42.html", "http://127.0.0.1:8090/catalogue/page-2.html", "http://127.0.0.1:8090/"]`)
	items := []byte(`{"CQ-000040": "d017eaf91de7801d"}`)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var l []string
			var m map[string]string
			if json.Unmarshal(links, &l) != nil || json.Unmarshal(items, &m) != nil || len(l) != 5 || len(m) != 1 {
				b.Fatal("decode")
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := decodeStrings(links)
			n, err2 := countKeys(items)
			if err != nil || err2 != nil || len(l) != 5 || n != 1 {
				b.Fatal("decode")
			}
		}
	})
}
