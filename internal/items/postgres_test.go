package items

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"crawlq/internal/dbtest"
)

func TestPostgresSink(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := context.Background()
	sink := NewPostgresSink(pool)

	batch := page(7, 0, 0, 5)
	batch = append(batch, batch[0]) // a duplicate key inside one batch is skipped too
	batch[0].Data = json.RawMessage(`{"title":"caf\u00e9 <b>", "nested":{"n":[1,2]}}`)
	for range 2 { // the second write is a retry: nothing changes
		if err := sink.Write(ctx, batch); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	// Another run may reuse the same keys.
	if err := sink.Write(ctx, page(8, 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	if n, err := CountItems(ctx, pool, 7); err != nil || n != 5 {
		t.Fatalf("CountItems(7) = %d, %v; want 5", n, err)
	}
	if n, err := CountItems(ctx, pool, 9); err != nil || n != 0 {
		t.Fatalf("CountItems(9) = %d, %v; want 0", n, err)
	}
	items, err := ListItems(ctx, pool, 7, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 {
		t.Fatalf("ListItems limit 3 returned %d", len(items))
	}
	got := items[0]
	if got.Key != batch[0].Key || got.RunID != 7 || got.Spider != "books" || got.URL != batch[0].URL {
		t.Fatalf("first item = %+v, want key %s", got, batch[0].Key)
	}
	var data map[string]any
	if err := json.Unmarshal(got.Data, &data); err != nil || data["title"] != "café <b>" {
		t.Fatalf("data round trip: %s (%v)", got.Data, err)
	}
	for _, limit := range []int{0, -1, MaxListLimit + 1} {
		if _, err := ListItems(ctx, pool, 7, limit); err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("ListItems limit %d: err = %v, want a limit error", limit, err)
		}
	}
	poison := page(7, 1, 0, 1)
	poison[0].Data = json.RawMessage(`{"n":1e1000000}`)
	if err := sink.Write(ctx, poison); !errors.Is(err, ErrInvalidItem) {
		t.Errorf("Write of a number jsonb cannot hold = %v, want ErrInvalidItem", err)
	}
	if err := sink.Write(ctx, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}
