package urlstate

import (
	"testing"
	"time"
)

func TestDiffCountsEveryKey(t *testing.T) {
	ch, n := Diff(map[string]string{"a": "1", "b": "2", "c": "3"}, map[string]string{"a": "1", "b": "9", "d": "4"})
	if n != (Counts{New: 1, Changed: 1, Unchanged: 1, Gone: 1}) || len(ch) != 3 {
		t.Errorf("Diff = %v, %+v; want d new, b changed, a unchanged, c gone", ch, n)
	}
}

func TestNextIntervalStaysInBounds(t *testing.T) {
	lo, hi := time.Hour, 8*time.Hour
	for _, tc := range []struct {
		last    time.Duration
		changed bool
		want    time.Duration
	}{
		{0, false, lo}, {0, true, lo}, {time.Hour, false, 2 * time.Hour}, {4 * time.Hour, true, 2 * time.Hour},
		{8 * time.Hour, false, hi}, {time.Hour, true, lo},
	} {
		if got := NextInterval(tc.last, tc.changed, lo, hi); got != tc.want {
			t.Errorf("NextInterval(%s, %v) = %s, want %s", tc.last, tc.changed, got, tc.want)
		}
	}
}
