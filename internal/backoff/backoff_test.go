package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelayDoublesToTheCap(t *testing.T) {
	p := Policy{Base: time.Second, Max: 5 * time.Second}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for attempt, w := range want {
		if got := p.Delay(attempt); got != w {
			t.Errorf("Delay(%d) = %v, want %v", attempt, got, w)
		}
	}
	if got := (Policy{}).Delay(3); got != 0 {
		t.Errorf("zero policy Delay = %v, want 0", got)
	}
	if got := (Policy{Base: time.Second}).Delay(4); got != time.Second {
		t.Errorf("no Max: Delay = %v, want Base", got)
	}
	if got := (Policy{Base: time.Second, Max: 1 << 62}).Delay(1000); got != 1<<62 {
		t.Errorf("huge attempt: Delay = %v, want the cap (no overflow)", got)
	}
}

func TestJitterStaysInTheUpperHalf(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := p.Delay(3)
		if d < 200*time.Millisecond || d > 400*time.Millisecond {
			t.Fatalf("jittered Delay(3) = %v, want within [200ms, 400ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("jitter gave only %d distinct delays in 1000 draws", len(seen))
	}
}

func TestSleepStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep on a cancelled context reported a full wait")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep(1ms) did not report a full wait")
	}
}

func TestSpreadWaitsAtMostAQuarterMoreUpToASecond(t *testing.T) {
	for _, tc := range []struct{ d, lo, hi time.Duration }{
		{-time.Second, 0, time.Millisecond},
		{0, 0, time.Millisecond},
		{400 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond},
		{time.Hour, time.Hour, time.Hour + time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			got := Spread(tc.d)
			if got < tc.lo || got > tc.hi {
				t.Fatalf("Spread(%s) = %s, want within [%s, %s]", tc.d, got, tc.lo, tc.hi)
			}
			seen[got] = true
		}
		if len(seen) < 2 {
			t.Fatalf("Spread(%s) drew one value 200 times: no spread", tc.d)
		}
	}
}
