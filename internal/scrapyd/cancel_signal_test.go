package scrapyd_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

// TestCancelSignalForm: cancel.json's signal form field reaches the run's cancel record (the
// runner sends it), as Scrapyd's cancel.json passes it to the process; a bad one is refused
// naming it, and nothing is cancelled.
func TestCancelSignalForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.schedule(t, "sig-1")
	var out map[string]any
	f.post(t, "/cancel.json", url.Values{"project": {"default"}, "job": {"sig-1"}, "signal": {"BOGUS"}}, &out)
	if msg, _ := out["message"].(string); out["status"] != "error" || !strings.Contains(msg, `signal "BOGUS"`) {
		t.Fatalf("bad signal: %v", out)
	}
	if c, err := f.store.Cancel(context.Background(), id); err != nil || c.Count != 0 {
		t.Fatalf("a refused cancel was recorded: %+v %v", c, err)
	}
	f.post(t, "/cancel.json", url.Values{"project": {"default"}, "job": {"sig-1"}, "signal": {"TERM"}}, &out)
	if out["status"] != "ok" || out["prevstate"] != "pending" {
		t.Fatalf("cancel: %v", out)
	}
	if c, err := f.store.Cancel(context.Background(), id); err != nil || c.Count != 1 || c.Signal != "TERM" {
		t.Fatalf("recorded cancel: %+v %v; want TERM, 1", c, err)
	}
}
