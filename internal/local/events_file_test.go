package local_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/events"
	"crawlq/internal/testwait"
)

// With CRAWLQ_EVENT_BUS=file:PATH (crawlq local --event-bus file:PATH) a run's events go to a
// JSON Lines file, in EventBridge's envelope, each once and in order, and the run's event list
// says they were published.
func TestRunEventsToAJSONLinesFile(t *testing.T) {
	_, url := dbtest.Schema(t)
	path := filepath.Join(t.TempDir(), "events.jsonl")
	site := demosite.New(demosite.Config{Items: 6, PerPage: 6, SlowDelay: 10 * time.Millisecond})
	addr, err := site.Serve(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := runLocal(t, url, map[string]string{"CRAWLQ_EVENT_BUS": events.FileBusPrefix + path}, -1)
	ctx, st, pool := t.Context(), rs.st, rs.deps.Pool

	resp := st.API().Handle(ctx, []byte(`{"action":"schedule","spider":"demo","args":{"base_url":"http://`+addr.String()+`"}}`))
	if resp["status"] != "ok" {
		t.Fatalf("schedule: %v", resp)
	}
	run, _ := strconv.ParseInt(resp["jobid"].(string), 10, 64)
	type line struct {
		DetailType string `json:"detail-type"`
		Source     string `json:"source"`
		Detail     struct {
			RunID   int64  `json:"run_id"`
			State   string `json:"state"`
			Outcome string `json:"outcome"`
		} `json:"detail"`
	}
	states := testwait.For(t, "the run's events in "+path+", the last succeeded", func() ([]string, bool) {
		var states []string
		f, err := os.Open(path)
		if err != nil {
			return nil, false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			if l.Detail.RunID != run || l.Source != "crawlq" || l.DetailType != events.DetailType {
				t.Fatalf("line %q", sc.Text())
			}
			states = append(states, l.Detail.State)
		}
		return states, len(states) > 0 && states[len(states)-1] == "succeeded"
	})
	if want := []string{"pending", "running", "succeeded"}; len(states) != 3 || states[0] != want[0] || states[1] != want[1] {
		t.Fatalf("events in the file: %v, want %v", states, want)
	}
	// The publisher marks an event published after its line is written (at least once: a crash
	// between the two writes the line again), so the marks follow the lines shortly.
	testwait.Until(t, "the events written to the file marked published", func() bool {
		recorded, err := events.RunEvents(ctx, pool, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recorded {
			if r.PublishedAt == nil {
				return false
			}
		}
		return len(recorded) == 3
	})
}
