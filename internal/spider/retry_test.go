package spider

import (
	"testing"
	"time"
)

func TestRetryDelaysDoubleToTheirCaps(t *testing.T) {
	r := Retry{Backoff: time.Second, MaxBackoff: 5 * time.Second, HostPause: 2 * time.Second, MaxHostPause: 16 * time.Second}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		if got := r.PageBackoff(i + 1); got != want {
			t.Errorf("PageBackoff(%d) = %v, want %v", i+1, got, want)
		}
	}
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second} {
		if got := r.HostPauseAfter(i + 1); got != want {
			t.Errorf("HostPauseAfter(%d) = %v, want %v", i+1, got, want)
		}
	}
	// A cap below the base (refused in specs) wins; a zero base means no delay.
	if got := (Retry{Backoff: time.Minute, MaxBackoff: time.Second}).PageBackoff(1); got != time.Second {
		t.Errorf("cap below base: PageBackoff(1) = %v, want 1s", got)
	}
	if got := (Retry{MaxBackoff: time.Second}).PageBackoff(3); got != 0 {
		t.Errorf("zero base: PageBackoff(3) = %v, want 0", got)
	}
}
