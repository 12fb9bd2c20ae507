package db

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// arraySamples are elements the array parser reads specially, or that need quoting.
var arraySamples = []string{"", "a", "NULL", "null", "Null", "nul", "a b", " a", "a\tb", "a\nb", "a\vb", "a\fb",
	"a\rb", `a"b`, `a\b`, `\`, `"`, "{a}", "a,b", "{}", "é ü", "http://127.0.0.1:9000/item/42?x=1&y=%20#f"}

// The one-pass encoders write exactly the literals pgx's generic array encoder writes, so the
// server reads the same arrays; the round trip through each exec mode is in db_test.go.
func FuzzArrayTextMatchesPgx(f *testing.F) {
	f.Add(strings.Join(arraySamples, "\x1f"), int64(-9223372036854775808), int64(42))
	f.Fuzz(func(t *testing.T, joined string, a, b int64) {
		strs := strings.Split(joined, "\x1f")
		pgxMap, ours := pgtype.NewMap(), pgtype.NewMap()
		registerArrayEncoders(ours)
		for _, v := range []any{strs, strs[:0], []string(nil), []int64{a, b}, []int64{}, []int64(nil)} {
			want, err := pgxMap.Encode(0, pgtype.TextFormatCode, v, nil)
			if err != nil {
				t.Skip(err) // pgx refuses it (invalid UTF-8 is sent as it is by both)
			}
			got, err := ours.Encode(0, pgtype.TextFormatCode, v, nil)
			if err != nil {
				t.Fatalf("%#v: %v", v, err)
			}
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("%#v: got %q, pgx writes %q", v, got, want)
			}
		}
	})
}

// BenchmarkArrayParamText encodes a chain page's discovered URLs and a completion batch's ids,
// as the default exec mode sends them, with pgx's array encoder and with registerArrayEncoders.
func BenchmarkArrayParamText(b *testing.B) {
	urls := make([]string, 21)
	ids := make([]int64, 256)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:9000/item/%d", 1000+i)
	}
	for i := range ids {
		ids[i] = 1<<40 + int64(i)
	}
	ours := pgtype.NewMap()
	registerArrayEncoders(ours)
	for _, m := range []struct {
		name string
		m    *pgtype.Map
	}{{"pgx", pgtype.NewMap()}, {"crawlq", ours}} {
		for _, v := range []struct {
			name string
			v    any
		}{{"urls", urls}, {"ids", ids}} {
			b.Run(m.name+"/"+v.name, func(b *testing.B) {
				b.ReportAllocs()
				var buf []byte
				for b.Loop() {
					var err error
					if buf, err = m.m.Encode(0, pgtype.TextFormatCode, v.v, buf[:0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
