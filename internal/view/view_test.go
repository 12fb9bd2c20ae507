package view_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"crawlq/internal/api"
	"crawlq/internal/queue"
	"crawlq/internal/view"
)

// outputs are every type the CLI's --json and the api print, with what they hold. A new output
// type belongs here.
var outputs = []any{
	view.Run{}, view.Job{}, view.Enqueued{}, view.QueueStats{}, view.Spider{}, view.Item{},
	api.Job{}, api.ScheduleView{},
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Every field of every output type, and of the types inside them, has a snake_case json tag
// (or is embedded, or deliberately hidden with "-"), and nothing named like a token is printed.
func TestOutputsHaveSnakeCaseKeys(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Array || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty.Implements(reflect.TypeFor[json.Marshaler]()) ||
			reflect.PointerTo(ty).Implements(reflect.TypeFor[json.Marshaler]()) {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			if !f.IsExported() {
				continue
			}
			where := path + "." + f.Name
			tag, hasTag := f.Tag.Lookup("json")
			name, _, _ := strings.Cut(tag, ",")
			switch {
			case name == "-":
				continue
			case strings.Contains(strings.ToLower(f.Name+name), "token"):
				t.Errorf("%s (%s): a token in an output; tag it `json:\"-\"` or leave it out", where, ty)
			case f.Anonymous && name == "":
				// inlined: its fields are checked as the outer type's
			case !hasTag || name == "":
				t.Errorf("%s (%s): no json tag: it would print as %q", where, ty, f.Name)
			case !snake.MatchString(name):
				t.Errorf("%s (%s): json key %q is not snake_case", where, ty, name)
			}
			walk(f.Type, where)
		}
	}
	for _, o := range outputs {
		ty := reflect.TypeOf(o)
		walk(ty, ty.String())
	}
	if len(seen) < len(outputs) {
		t.Fatalf("walked %d types for %d outputs", len(seen), len(outputs))
	}
}

// A job's lease token never reaches an output, whatever the job holds.
func TestJobHasNoLeaseToken(t *testing.T) {
	const token = 8675309123456789
	until := time.Now()
	b, err := json.Marshal(view.NewJob(&queue.Job{ID: 1, Queue: "q", Kind: "k", State: queue.StateRunning, LeaseToken: token,
		LeaseUntil: &until, Worker: "w", Args: json.RawMessage(`{}`)}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), strconv.Itoa(token)) || strings.Contains(strings.ToLower(string(b)), "token") {
		t.Fatalf("job output holds its lease token: %s", b)
	}
}
