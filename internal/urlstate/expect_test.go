package urlstate_test

import (
	"math"
	"testing"
	"time"

	"crawlq/internal/urlstate"
)

// A page's expected change is 1 - 2^(-t/interval): a half when it is just due, three quarters at
// twice its interval; a URL without an estimate counts as changed.
func TestExpectedChange(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	page := urlstate.Due{FetchedAt: at, Status: 200, Interval: time.Hour}
	for _, c := range []struct {
		name  string
		d     urlstate.Due
		known bool
		now   time.Time
		want  float64
	}{
		{"no state", urlstate.Due{}, false, at, 1},
		{"last answer a 404", urlstate.Due{FetchedAt: at, Status: 404, Interval: time.Hour}, true, at.Add(time.Minute), 1},
		{"no interval", urlstate.Due{FetchedAt: at, Status: 200}, true, at.Add(time.Minute), 1},
		{"just fetched", page, true, at, 0},
		{"half its interval", page, true, at.Add(30 * time.Minute), 1 - math.Sqrt2/2},
		{"just due", page, true, at.Add(time.Hour), 0.5},
		{"twice its interval", page, true, at.Add(2 * time.Hour), 0.75},
	} {
		if got := urlstate.ExpectedChange(c.d, c.known, c.now); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: expected change %v; want %v", c.name, got, c.want)
		}
	}
}
