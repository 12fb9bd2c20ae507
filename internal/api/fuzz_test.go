package api_test

import (
	"errors"
	"testing"

	"crawlq/internal/api"
)

// FuzzDecode checks that Decode never panics and that it either rejects a request as a bad
// request or returns one whose fields are within their limits.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		``, `{`, `null`, `[]`, `{}`, `"x"`, `{"action":"listspiders"}`,
		`{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:1"},"priority":3,"delay_seconds":2.5}`,
		`{"action":"schedule","spider":"demo","at":"2030-01-02T15:04:05Z","unique_key":"k","replace":true}`,
		`{"action":"schedule","spider":"demo","setting":{"max_pages":3,"delay":"1s"}}`,
		`{"action":"cancel","job":"12"}`, `{"action":"status","jobid":12}`, `{"action":"status","job":1e99}`,
		`{"action":"listjobs","spider":"demo","limit":5}`, `{"action":"daemonstatus","project":"p"}`,
		`{"action":"addschedule","spider":"demo","cron":"0 3 * * 1-5","timezone":"Europe/Paris","name":"n"}`,
		`{"action":"delschedule","name":"n"}`, `{"action":"schedule","priority":1e400}`,
		`{"action":"schedule","delay_seconds":NaN}`, "{\"action\":\"\xff\"}", `{"action":"schedule","args":{"":""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := api.Decode(data)
		if err != nil {
			if !errors.Is(err, api.ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			if r != nil {
				t.Fatal("request returned with an error")
			}
			return
		}
		if r.Action == "" || len(r.Args) > api.MaxArgs {
			t.Fatalf("accepted %+v", r)
		}
		if r.Priority != nil && (*r.Priority < -1000 || *r.Priority > 1000) {
			t.Fatalf("accepted priority %d", *r.Priority)
		}
		if (r.Action == "cancel" || r.Action == "status") && r.Job <= 0 {
			t.Fatalf("accepted job %d", r.Job)
		}
	})
}
