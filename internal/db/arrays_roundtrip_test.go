package db_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"crawlq/internal/db"
	"crawlq/internal/dbtest"
)

// Arrays sent as parameters reach the server as the same arrays in every exec mode: NULL, empty,
// and elements the array parser reads specially.
func TestArrayParamsRoundTrip(t *testing.T) {
	strs := []string{"", "a", "NULL", "null", "a b", " a", "a\tb", "a\nb", `a"b`, `a\b`, `\`, "{a}", "a,b", "é ü",
		"http://127.0.0.1:9000/item/42?x=1&y=%20#f"}
	ints := []int64{0, -1, 1 << 40, -9223372036854775808, 9223372036854775807}
	for _, mode := range []string{"exec", "simple", "cache_describe", "cache_statement"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pool, err := db.Open(ctx, db.Config{URL: dbtest.URL(t), ExecMode: mode, MaxConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			for _, s := range [][]string{strs, {}, nil} {
				var got []string
				var isNull bool
				if err := pool.QueryRow(ctx, "SELECT $1::text[], $1::text[] IS NULL", s).Scan(&got, &isNull); err != nil {
					t.Fatalf("%q: %v", s, err)
				}
				if !slices.Equal(got, s) || isNull != (s == nil) {
					t.Errorf("sent %q (nil %v), the server read %q (NULL %v)", s, s == nil, got, isNull)
				}
			}
			for _, n := range [][]int64{ints, {}, nil} {
				var got []int64
				var isNull bool
				if err := pool.QueryRow(ctx, "SELECT $1::bigint[], $1::bigint[] IS NULL", n).Scan(&got, &isNull); err != nil {
					t.Fatalf("%v: %v", n, err)
				}
				if !slices.Equal(got, n) || isNull != (n == nil) {
					t.Errorf("sent %v (nil %v), the server read %v (NULL %v)", n, n == nil, got, isNull)
				}
			}
		})
	}
}

// A pool's connections encode []string and []int64 parameters in the text format without an
// allocation per element: pgx's generic array encoder makes two or more per element, the most
// allocations of any step of a crawled page.
func TestArrayParamsEncodeInOnePass(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := db.Open(ctx, db.Config{URL: dbtest.URL(t), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m := conn.Conn().TypeMap()
	urls := []string{"http://127.0.0.1:9000/item/1", "http://127.0.0.1:9000/item/2", "http://127.0.0.1:9000/list/2"}
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	for _, v := range []any{urls, ids} {
		var buf []byte
		allocs := testing.AllocsPerRun(100, func() {
			if buf, err = m.Encode(0, pgtype.TextFormatCode, v, buf[:0]); err != nil {
				t.Fatal(err)
			}
		})
		if allocs >= 1 {
			t.Errorf("encoding %T %v: %.0f allocations, want none", v, v, allocs)
		}
	}
}
