package cli

import (
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
)

func TestProgressLineETA(t *testing.T) {
	r := &crawl.Run{ID: 7, State: "running", StartedAt: &time.Time{}}
	r.Stats.Pages, r.Stats.Errors, r.Stats.Items, r.Stats.Duration = 90, 10, 80, 10
	line := progressLine(r, 35, 4, 400)
	for _, want := range []string{"run 7 running", "pages 90/400", "items 80", "queue 35 waiting, 4 running", "10.0 pages/s", "ETA 30s"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	if strings.Contains(progressLine(r, 0, 0, 0), "ETA") {
		t.Error("an ETA without a page limit")
	}
}
