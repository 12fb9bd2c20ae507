package testwait_test

import (
	"fmt"
	"testing"

	"crawlq/internal/testwait"
)

// fatalRecorder is a TB that records a failure instead of ending the test.
type fatalRecorder struct{ msg string }

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

// A signal is off until Init (Send does nothing), then delivers what is sent in order, and
// WaitFor skips values until one satisfies it.
func TestSignal(t *testing.T) {
	var s testwait.Signal[int]
	s.Send(1) // off: dropped, never blocks
	var f fatalRecorder
	s.Wait(&f)
	if f.msg == "" {
		t.Fatal("Wait on a signal never Init'ed did not fail")
	}
	s.Init()
	go func() {
		for i := 1; i <= 3; i++ {
			s.Send(i)
		}
	}()
	if v := s.Wait(t); v != 1 {
		t.Fatalf("first value %d, want 1", v)
	}
	if v := s.WaitFor(t, "3", func(v int) bool { return v == 3 }); v != 3 {
		t.Fatalf("WaitFor returned %d, want 3", v)
	}
}

// For returns the value that ended the wait.
func TestFor(t *testing.T) {
	n := 0
	if got := testwait.For(t, "n reaches 3", func() (int, bool) { n++; return n, n == 3 }); got != 3 {
		t.Fatalf("For returned %d, want 3", got)
	}
}
