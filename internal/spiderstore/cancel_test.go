package spiderstore_test

import (
	"errors"
	"testing"

	"crawlq/internal/spiderstore"
)

func TestParseCancelSignal(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "", "INT": "INT", "int": "INT", "SIGTERM": "TERM", "KILL": "KILL", "9": "9", "15": "15"} {
		if got, err := spiderstore.ParseCancelSignal(in); err != nil || got != want {
			t.Errorf("ParseCancelSignal(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"0", "65", "-2", "BOGUS", "SIG", "INT "} {
		if _, err := spiderstore.ParseCancelSignal(bad); !errors.Is(err, spiderstore.ErrInvalid) {
			t.Errorf("ParseCancelSignal(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// TestRequestCancel: each cancel is counted and carries its signal, for a run with a record and
// one without (cancelled before it started).
func TestRequestCancel(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	if c, err := st.Cancel(ctx, 7); err != nil || c != (spiderstore.CancelRequest{}) {
		t.Fatalf("no cancel yet: %+v %v", c, err)
	}
	if _, err := st.StartRun(ctx, 7, "", "catalog", "", 1234); err != nil {
		t.Fatal(err)
	}
	if c, err := st.RequestCancel(ctx, 7, "catalog", ""); err != nil || c.Count != 1 || c.Signal != "" {
		t.Fatalf("first cancel: %+v %v", c, err)
	}
	if c, err := st.RequestCancel(ctx, 7, "catalog", "sigterm"); err != nil || c.Count != 2 || c.Signal != "TERM" {
		t.Fatalf("second cancel: %+v %v", c, err)
	}
	if c, err := st.Cancel(ctx, 7); err != nil || c.Count != 2 || c.Signal != "TERM" {
		t.Fatalf("read back: %+v %v", c, err)
	}
	if rec, err := st.Run(ctx, 7); err != nil || rec.PID != 1234 {
		t.Fatalf("the run's record survives its cancels: %+v %v", rec, err)
	}
	if c, err := st.RequestCancel(ctx, 8, "catalog", "KILL"); err != nil || c.Count != 1 || c.Signal != "KILL" {
		t.Fatalf("run without a record: %+v %v", c, err)
	}
	if _, err := st.RequestCancel(ctx, 8, "catalog", "BOGUS"); !errors.Is(err, spiderstore.ErrInvalid) {
		t.Fatalf("bad signal: %v", err)
	}
	if c, _ := st.Cancel(ctx, 8); c.Count != 1 {
		t.Fatalf("a refused cancel counted: %+v", c)
	}
}
