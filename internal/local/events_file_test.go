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
	var states []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		states = states[:0]
		if f, err := os.Open(path); err == nil {
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
			f.Close()
		}
		if len(states) > 0 && states[len(states)-1] == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events in %s: %v; want pending, running, succeeded", path, states)
		}
		time.Sleep(100 * time.Millisecond) // paces a read of the file
	}
	if want := []string{"pending", "running", "succeeded"}; len(states) != 3 || states[0] != want[0] || states[1] != want[1] {
		t.Fatalf("events in the file: %v, want %v", states, want)
	}
	recorded, err := events.RunEvents(ctx, pool, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recorded {
		if r.PublishedAt == nil {
			t.Errorf("event %s written to the file but not marked published: %+v", r.State, r)
		}
	}
}
