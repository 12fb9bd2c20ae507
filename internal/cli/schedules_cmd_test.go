package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"crawlq/internal/cronstore"
	"crawlq/internal/dbtest"
)

// crawlq schedules adds, lists and deletes the schedules crawlq local fires, through the api's
// validation; bad input names the flag or field.
func TestSchedulesCommand(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "schedules", "add", "--spider", "demo", "--cron", "30 3 * * 1-5", "--name", "nightly",
		"--timezone", "Europe/Paris", "--arg", "base_url=http://127.0.0.1:8088")
	if code != 0 || !strings.Contains(out, "nightly: cron(30 3 ? * 2-6 *) (Europe/Paris), first tick") {
		t.Fatalf("add: exit %d, %q %q", code, out, errs)
	}
	// No crawlq local looks for due schedules on this database: add and list say the schedule
	// will not fire (crawlq worker, the README's first process, fires none).
	const noFirer = "no crawlq local has looked for due schedules on this database in the last 1m0s (none ever has)"
	if !strings.Contains(errs, noFirer) {
		t.Errorf("add with no crawlq local: stderr %q; want %q", errs, noFirer)
	}
	if code, _, errs := run(t, url, "schedules", "list"); code != 0 || !strings.Contains(errs, noFirer) {
		t.Errorf("list with no crawlq local: exit %d, stderr %q; want %q", code, errs, noFirer)
	}
	// A look for due schedules, as crawlq local's makes every second: no note any more.
	st, err := cronstore.New(cronstore.Config{Pool: dbtest.Open(t, url, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FireDue(context.Background(), 1, nil); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, url, "schedules", "list"); code != 0 || errs != "" {
		t.Errorf("list with a crawlq local looking: exit %d, stderr %q; want nothing", code, errs)
	}
	if code, _, errs := run(t, url, "schedules", "add", "--spider", "demo", "--cron", "30 3 * * 1-5", "--name", "nightly"); code != 1 ||
		!strings.Contains(errs, "already exists") {
		t.Fatalf("add of an existing name: exit %d, %q", code, errs)
	}
	if code, out, errs := run(t, url, "schedules", "add", "--spider", "demo", "--cron", "rate(5 seconds)", "--name", "nightly", "--replace"); code != 0 ||
		!strings.Contains(out, "rate(5 seconds)") {
		t.Fatalf("add --replace: exit %d, %q %q", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"schedules", "add", "--cron", "@daily"}, 2, "--spider"},
		{[]string{"schedules", "add", "--spider", "demo"}, 2, "--cron"},
		{[]string{"schedules", "add", "--spider", "demo", "--cron", "61 * * * *"}, 1, "cron"},
		{[]string{"schedules", "add", "--spider", "demo", "--cron", "cron(0 0 L * ? *)"}, 1, "day-of-month"},
		{[]string{"schedules", "add", "--spider", "nosuch", "--cron", "@daily"}, 1, "nosuch"},
		{[]string{"schedules", "add", "--spider", "demo", "--cron", "@daily", "--timezone", "Mars/Olympus"}, 1, "timezone"},
		{[]string{"schedules", "add", "--spider", "demo", "--cron", "@daily", "--settings", "{"}, 2, "--settings"},
		{[]string{"schedules", "del", "nosuch"}, 1, `unknown schedule "nosuch" (crawlq schedules list shows the schedules)`},
	} {
		if code, _, errs := run(t, url, c.args...); code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", c.args, code, errs, c.code, c.want)
		} else if strings.Contains(errs, "schedule:") || strings.Contains(errs, "bad request") {
			t.Errorf("%q: %q names the api's action, not the command's words", c.args, errs)
		}
	}
	code, out, errs = run(t, url, "schedules", "list", "--json")
	var list []struct {
		Name, Expression, Timezone, State string
		NextAt                            time.Time `json:"next_at"`
		Payload                           map[string]any
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
		t.Fatalf("list: exit %d, %q %q", code, out, errs)
	}
	if l := list[0]; l.Name != "nightly" || l.Expression != "rate(5 seconds)" || l.State != "ENABLED" || l.Payload["spider"] != "demo" ||
		l.NextAt.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("listed: %+v", l)
	}
	if code, out, _ := run(t, url, "schedules", "list"); code != 0 || !strings.Contains(out, "NEXT") || !strings.Contains(out, "nightly") {
		t.Errorf("list: exit %d, %q", code, out)
	}
	if code, out, errs := run(t, url, "schedules", "del", "nightly"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("del: exit %d, %q %q", code, out, errs)
	}
	if code, out, _ := run(t, url, "schedules", "list", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("list after del: exit %d, %q", code, out)
	}
}
