package local

import (
	"testing"
	"time"
)

// A due tick that FireDue left behind (held by another crawlq local while it fires it, or
// FireDue failed) must not make cronLoop poll the database without pause until it goes.
func TestCronWait(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		next      time.Time
		known     bool
		fullBatch bool
		want      time.Duration
	}{
		{"no schedule", time.Time{}, false, false, time.Second},
		{"tick soon", now.Add(300 * time.Millisecond), true, false, 300 * time.Millisecond},
		{"tick later", now.Add(time.Hour), true, false, time.Second},
		{"tick due, held elsewhere", now.Add(-2 * time.Second), true, false, time.Second},
		{"tick due now", now, true, false, time.Second},
		{"a full batch fired", now.Add(-time.Second), true, true, 0},
	} {
		if got := cronWait(now, c.next, c.known, c.fullBatch); got != c.want {
			t.Errorf("%s: cronWait = %s, want %s", c.name, got, c.want)
		}
	}
}
