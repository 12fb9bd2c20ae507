package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// A spider pushed through the api is scheduled by the same process at once, even right after
// the api answered its name unknown (the registry caches answers for 2 s); a deleted one is
// refused at once.
func TestPushedSpiderSchedulableAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	schedule := `{"action":"schedule","spider":"fresh","delay_seconds":3600,"args":{"base_url":"http://127.0.0.1:9"}}`
	if r := f.call(t, schedule); r["status"] != "error" || !strings.Contains(r["message"].(string), "fresh") {
		t.Fatalf("schedule before the push: %v", r)
	}
	f.ok(t, `{"action":"pushspider","spec":"name: fresh\nstart_urls: [http://127.0.0.1:9/]\n"}`)
	run := f.ok(t, schedule)["run_id"]
	// The pending run needs the spider: it is not deleted from under it.
	if r := f.call(t, `{"action":"delspider","spider":"fresh"}`); r["status"] != "error" || !strings.Contains(r["message"].(string), "have not finished") {
		t.Fatalf("delete under a pending run: %v", r)
	}
	f.ok(t, fmt.Sprintf(`{"action":"cancel","job":"%v"}`, run))
	f.ok(t, `{"action":"delspider","spider":"fresh"}`)
	if r := f.call(t, schedule); r["status"] != "error" {
		t.Fatalf("schedule right after the delete: %v", r)
	}
}
