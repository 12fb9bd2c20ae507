package api_test

import (
	"regexp"
	"testing"
)

// userKeyed are response objects whose keys are the user's or the data's (spider arguments,
// field names, queue names, error kinds), not the api's.
var userKeyed = map[string]bool{"args": true, "field_coverage": true, "errors_by_kind": true, "workers_by_queue": true, "payload": true, "scrapy_settings": true}

var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Every key of every response is snake_case, nested ones too (the types behind them are checked
// by reflection in internal/view; this checks what the api really sends, maps included).
func TestResponsesUseSnakeCaseKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var check func(path string, v any)
	check = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snakeKey.MatchString(k) {
					t.Errorf("%s: key %q is not snake_case", path, k)
				}
				if !userKeyed[k] {
					check(path+"."+k, x)
				}
			}
		case []any:
			for _, x := range v {
				check(path+"[]", x)
			}
		}
	}
	for _, p := range []string{
		`{"action":"schedule","spider":"demo","jobid":"keys-1","delay_seconds":3600,"args":{"base_url":"http://127.0.0.1:9"}}`,
		`{"action":"status","job":"keys-1"}`,
		`{"action":"listjobs"}`,
		`{"action":"daemonstatus"}`,
		`{"action":"listspiders"}`,
		`{"action":"listprojects"}`,
		`{"action":"listversions","project":"default"}`,
		`{"action":"pushspider","spec":"name: keys\nstart_urls: [http://127.0.0.1:9/]\n"}`,
		`{"action":"delspider","spider":"keys"}`,
		`{"action":"cancel","job":"keys-1"}`,
	} {
		check(p, f.ok(t, p))
	}
	check("error", f.call(t, `{"action":"nope"}`))
}
