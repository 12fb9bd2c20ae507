package security

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/api"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spiderstore"
)

// hostile strings that would change a statement built by string concatenation.
var injections = []string{
	`'; DROP TABLE crawlq_job; --`,
	`'); DELETE FROM crawlq_run; --`,
	`" OR 1=1 --`,
	`$1`,
	`$1, $2); DROP TABLE crawlq_item; --`,
	`\'; DROP TABLE crawlq_seen; --`,
	`\\`,
	`\x00`,
	`O'Brien`,
	"tab\tnewline\ncr\r",
	`%s%d%v`,
	`'||pg_sleep(5)||'`,
	`$$; DROP TABLE crawlq_job; $$`,
	`E'\\047'`,
	"nul\x00byte",
	"unicode ☃ \u202e",
}

// sqlSyntaxProblem reports whether err comes from Postgres rejecting a statement's text
// (syntax error or access rule violation, SQLSTATE class 42): the sign of input spliced into SQL.
func sqlSyntaxProblem(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "42")
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// tables lists the schema's tables with their row counts.
func tables(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	ctx := ctxT(t)
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, n := range names {
		var c int64
		// n comes from the catalogue, not from input.
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q`, n)).Scan(&c); err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

// Every user-supplied field of enqueue, crawl schedule and the api's schedule carries injection
// strings: each value either round-trips verbatim or is rejected with a validation error (never a
// Postgres syntax error), and afterwards every table is still there with its rows.
func TestInjectionThroughEveryField(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := ctxT(t)
	n, err := node.New(node.Config{Pool: pool, Queues: []string{"control"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders})
	if err != nil {
		t.Fatal(err)
	}
	// Arguments of any name go to a command spider (a Scrapy project's -a); declarative specs
	// take only the arguments they read.
	if _, err := n.Store.Push(ctx, spiderstore.File{Name: "cmd.yaml", Data: []byte("name: cmd\nkind: command\ncommand: [scrapy, crawl, cmd]\n")}, ""); err != nil {
		t.Fatal(err)
	}
	// A row in each table the attacks name, so a successful DROP or DELETE would show.
	if _, err := n.Queue.Enqueue(ctx, queue.EnqueueParams{Queue: "canary", Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	before := tables(t, pool)

	var roundTrips, rejected int
	reject := func(field, s string, err error) {
		t.Helper()
		if sqlSyntaxProblem(err) {
			t.Errorf("%s %q reached SQL as text: %v", field, s, err)
		}
		if err.Error() == "" {
			t.Errorf("%s %q rejected without a message", field, s)
		}
		rejected++
	}
	for i, s := range injections {
		// queue: the queue name and kind are validated (a charset), so these are rejected.
		if _, err := n.Queue.Enqueue(ctx, queue.EnqueueParams{Queue: s, Kind: "noop"}); err != nil {
			reject("enqueue queue", s, err)
		} else {
			t.Errorf("enqueue accepted queue name %q", s)
		}
		if _, err := n.Queue.Enqueue(ctx, queue.EnqueueParams{Queue: "q", Kind: s}); err != nil {
			reject("enqueue kind", s, err)
		} else {
			t.Errorf("enqueue accepted kind %q", s)
		}
		// args and unique key are free text: they must round-trip.
		args, _ := json.Marshal(map[string]string{"v": s, s: "key"})
		res, err := n.Queue.Enqueue(ctx, queue.EnqueueParams{Queue: "q", Kind: "noop", Args: args, UniqueKey: fmt.Sprintf("%d:%s", i, s)})
		if err != nil {
			// JSON cannot carry NUL into jsonb; Postgres refuses \u0000 in jsonb text.
			reject("enqueue args/unique key", s, err)
		} else {
			j, err := n.Queue.Get(ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			if err := json.Unmarshal(j.Args, &got); err != nil || got["v"] != s || got[s] != "key" {
				t.Errorf("args of %q came back as %s (%v)", s, j.Args, err)
			}
			if want := fmt.Sprintf("%d:%s", i, s); j.UniqueKey != want {
				t.Errorf("unique key %q came back as %q", want, j.UniqueKey)
			}
			roundTrips++
		}
		if _, err := n.Queue.List(ctx, queue.ListParams{Queue: s}); err != nil {
			reject("list queue", s, err)
		}
		// crawl.Schedule: spider name, args, idempotency key, user agent.
		if _, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: s}); err == nil {
			t.Errorf("schedule accepted spider %q", s)
		} else {
			reject("schedule spider", s, err)
		}
		ua := "ua " + s
		sc, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "cmd", Delay: time.Hour,
			Args: map[string]string{"note": s, s: "v"}, IdempotencyKey: "crawl:" + s, Settings: crawl.Overrides{UserAgent: &ua}})
		if err != nil {
			reject("schedule args/key/settings", s, err)
		} else {
			r, err := n.Crawler.Get(ctx, sc.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Args["note"] != s || r.Args[s] != "v" || r.IdempotencyKey != "crawl:"+s || r.Settings.UserAgent == nil || *r.Settings.UserAgent != ua {
				t.Errorf("run of %q came back as args %q key %q", s, r.Args, r.IdempotencyKey)
			}
			roundTrips++
		}
		if _, err := n.Crawler.List(ctx, crawl.ListParams{Spider: s, States: []string{s}}); err != nil {
			reject("list runs", s, err)
		}
		// api schedule through the JSON payload, as a Lambda invoke delivers it.
		for _, req := range []map[string]any{
			{"action": "schedule", "spider": s},
			{"action": "schedule", "spider": "cmd", "delay_seconds": 3600, "unique_key": "api:" + s,
				"args": map[string]string{"note": s, s: "v"}, "settings": map[string]any{"user_agent": ua}},
			{"action": "listjobs", "spider": s},
			{"action": "status", "job": s},
			{"action": "cancel", "job": s},
		} {
			payload, _ := json.Marshal(req)
			out := a.Handle(ctx, payload)
			if out["status"] != "ok" {
				msg, _ := out["message"].(string)
				if strings.Contains(msg, "SQLSTATE 42") || msg == "" {
					t.Errorf("api %s with %q: %v", req["action"], s, out)
				}
				rejected++
				continue
			}
			if req["action"] != "schedule" {
				continue
			}
			var id int64
			fmt.Sscan(fmt.Sprint(out["jobid"]), &id)
			r, err := n.Crawler.Get(ctx, id)
			if err != nil {
				t.Fatalf("api schedule answered %v: %v", out, err)
			}
			if r.Args["note"] != s || r.Args[s] != "v" || r.IdempotencyKey != "api:"+s || r.Settings.UserAgent == nil || *r.Settings.UserAgent != ua {
				t.Errorf("api run of %q came back as args %q key %q", s, r.Args, r.IdempotencyKey)
			}
			roundTrips++
		}
	}
	after := tables(t, pool)
	for name, c := range before {
		got, ok := after[name]
		if !ok {
			t.Errorf("table %s is gone", name)
		} else if got < c {
			t.Errorf("table %s lost rows: %d before, %d after", name, c, got)
		}
	}
	names := func(m map[string]int64) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(names(before), names(after)) {
		t.Errorf("tables changed: %v -> %v", names(before), names(after))
	}
	if roundTrips < 2*len(injections) {
		t.Errorf("only %d values round-tripped; most injections should be stored verbatim", roundTrips)
	}
	t.Logf("%d injection strings: %d stored and read back verbatim, %d rejected by validation", len(injections), roundTrips, rejected)
}
