package scrapyd

import (
	"strings"
	"testing"

	"crawlq/internal/api"
)

// The api's answers are maps; a key the Scrapyd shape expects that is missing or of another type
// must surface as an error, not as a null jobid or an empty job list.
func TestShapeRefusesAnswersItDoesNotKnow(t *testing.T) {
	s := &Server{cfg: Config{NodeName: "n"}}
	for _, c := range []struct {
		name   string
		action string
		out    api.Response
		want   string // "" when the shape must succeed
	}{
		{"schedule", api.ActSchedule, api.Response{"status": "ok", "jobid": "j1"}, ""},
		{"schedule without jobid", api.ActSchedule, api.Response{"status": "ok"}, `no "jobid"`},
		{"listjobs", api.ActListJobs, api.Response{"pending": []api.Job{{ID: "a"}}, "running": []api.Job{}, "finished": []api.Job{}}, ""},
		{"listjobs pointer jobs", api.ActListJobs, api.Response{"pending": []*api.Job{}, "running": []api.Job{}, "finished": []api.Job{}}, "pending is a []*api.Job"},
		{"listjobs missing group", api.ActListJobs, api.Response{"pending": []api.Job{}, "running": []api.Job{}}, "finished is a <nil>"},
		{"status without job", api.ActStatus, api.Response{"currstate": "unknown"}, ""},
		{"status with a map job", api.ActStatus, api.Response{"currstate": "running", "job": map[string]any{}}, "job is a map[string]interface {}"},
		{"addversion", api.ActAddVersion, api.Response{"project": "p", "version": "v"}, `no "spiders"`},
		{"daemonstatus", api.ActDaemonStatus, api.Response{"pending": 1, "running": 0, "finished": 2, "jobs_pending": 5, "jobs_running": 0}, ""},
		{"daemonstatus without job counts", api.ActDaemonStatus, api.Response{"pending": 1, "running": 0, "finished": 2}, `no "jobs_pending"`},
		{"delproject", api.ActDelProject, api.Response{"status": "ok"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, err := s.shape(c.action, c.out)
			if c.want == "" {
				if err != nil {
					t.Fatalf("shape: %v", err)
				}
				if body["status"] != "ok" || body["node_name"] != "n" {
					t.Fatalf("body = %v", body)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("shape err = %v, want it to say %q (body %v)", err, c.want, body)
			}
		})
	}
	body, _ := s.shape(api.ActListJobs, api.Response{"pending": []api.Job{{ID: "a"}}, "running": []api.Job{{ID: "b"}}, "finished": []api.Job{}})
	pending := body["pending"].([]map[string]any)
	if _, hasArgs := pending[0]["args"]; len(pending) != 1 || pending[0]["id"] != "a" || !hasArgs {
		t.Fatalf("pending = %v", pending)
	}
	running := body["running"].([]map[string]any)
	if _, hasArgs := running[0]["args"]; len(running) != 1 || hasArgs {
		t.Fatalf("running = %v (only pending jobs show args)", running)
	}
}
