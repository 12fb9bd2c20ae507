package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"crawlq/internal/api"
	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/node"
)

// TestSchedulesMoto adds, lists and deletes recurring runs as EventBridge Scheduler schedules
// in moto, checking what was stored.
func TestSchedulesMoto(t *testing.T) {
	ctx := context.Background()
	sc := motoScheduler(t)
	const target = "arn:aws:lambda:us-east-1:123456789012:function:crawlq-api"
	const role = "arn:aws:iam::123456789012:role/crawlq-scheduler"
	f := newFixture(t, func(c *api.Config) { c.Scheduler, c.TargetARN, c.RoleARN = sc, target, role })

	bad := map[string]string{
		`{"action":"addschedule","spider":"demo","cron":"61 * * * *"}`:                              "cron",
		`{"action":"addschedule","spider":"demo","cron":"0 3 * * *","timezone":"Mars/Olympus"}`:     "timezone",
		`{"action":"addschedule","spider":"demo","cron":"0 3 * * *","timezone":"Local"}`:            "timezone",
		`{"action":"addschedule","spider":"nope","cron":"0 3 * * *"}`:                               "unknown spider",
		`{"action":"addschedule","spider":"demo","cron":"0 3 1 * 1"}`:                               "day-of-week",
		`{"action":"addschedule","spider":"demo","cron":"0 3 * * *","args":{"base_url":"ftp://x"}}`: "base_url",
		`{"action":"addschedule","spider":"demo","cron":"0 3 * * *","priority":-2000}`:              "priority",
		`{"action":"delschedule","name":"missing"}`:                                                 "unknown schedule",
	}
	for p, want := range bad {
		out := f.call(t, p)
		if out["status"] != "error" || !strings.Contains(out["message"].(string), want) {
			t.Errorf("%s: got %v, want an error mentioning %q", p, out, want)
		}
	}
	if l := f.ok(t, `{"action":"listschedules"}`)["schedules"].([]any); len(l) != 0 {
		t.Fatalf("bad input created schedules: %v", l)
	}

	out := f.ok(t, `{"action":"addschedule","name":"nightly","spider":"demo","args":{"base_url":"http://127.0.0.1:9"},
		"cron":"30 2 * * 1-5","timezone":"Europe/Paris","priority":5}`)
	if out["expression"] != "cron(30 2 ? * 2-6 *)" || out["timezone"] != "Europe/Paris" {
		t.Fatalf("addschedule: %v", out)
	}
	g, err := sc.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("nightly"), GroupName: aws.String("crawlq")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(g.ScheduleExpression) != "cron(30 2 ? * 2-6 *)" || aws.ToString(g.ScheduleExpressionTimezone) != "Europe/Paris" ||
		aws.ToString(g.Target.Arn) != target || aws.ToString(g.Target.RoleArn) != role {
		t.Fatalf("stored schedule: expr %q tz %q target %q role %q", aws.ToString(g.ScheduleExpression),
			aws.ToString(g.ScheduleExpressionTimezone), aws.ToString(g.Target.Arn), aws.ToString(g.Target.RoleArn))
	}
	var payload map[string]any
	if err := json.Unmarshal([]byte(aws.ToString(g.Target.Input)), &payload); err != nil {
		t.Fatal(err)
	}
	if payload["action"] != "schedule" || payload["spider"] != "demo" || payload["priority"] != float64(5) ||
		payload["args"].(map[string]any)["base_url"] != "http://127.0.0.1:9" {
		t.Fatalf("schedule payload: %v", payload)
	}
	// The payload is itself a valid api request.
	if _, err := api.Decode([]byte(aws.ToString(g.Target.Input))); err != nil {
		t.Fatalf("schedule payload does not decode: %v", err)
	}
	if out := f.call(t, `{"action":"addschedule","name":"nightly","spider":"demo","cron":"@hourly"}`); out["status"] != "error" {
		t.Fatalf("duplicate addschedule: %v", out)
	}
	f.ok(t, `{"action":"addschedule","name":"nightly","spider":"demo","cron":"@hourly","replace":true}`)
	auto := f.ok(t, `{"action":"addschedule","spider":"demo","cron":"rate(5 minutes)"}`)
	list := f.ok(t, `{"action":"listschedules"}`)["schedules"].([]any)
	got := map[string]string{}
	for _, s := range list {
		m := s.(map[string]any)
		got[m["name"].(string)] = m["expression"].(string) + " " + m["spider"].(string)
	}
	if len(got) != 2 || got["nightly"] != "cron(0 * * * ? *) demo" || got[auto["name"].(string)] != "rate(5 minutes) demo" {
		t.Fatalf("listschedules: %v", got)
	}
	f.ok(t, `{"action":"delschedule","name":"nightly"}`)
	f.ok(t, `{"action":"delschedule","name":"`+auto["name"].(string)+`"}`)
	if l := f.ok(t, `{"action":"listschedules"}`)["schedules"].([]any); len(l) != 0 {
		t.Fatalf("after delschedule: %v", l)
	}
	if n := f.count(t, "crawlq_run"); n != 0 {
		t.Fatalf("schedule actions wrote %d runs", n)
	}
}

// TestRecurringRunOfAVersion pins a recurring run to a stored version: the schedule's payload
// names it, an unknown one is refused naming the versions there are, and the payload, sent as
// EventBridge Scheduler would send it, starts a run of that version.
func TestRecurringRunOfAVersion(t *testing.T) {
	ctx := context.Background()
	sc := motoScheduler(t)
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Pipeline.Close(context.Background()) })
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders, Store: n.Store, Scheduler: sc,
		TargetARN: "arn:aws:lambda:us-east-1:123456789012:function:crawlq-api", RoleARN: "arn:aws:iam::123456789012:role/crawlq-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{api: a, pool: pool}
	for _, sel := range []string{"h1", "h2"} {
		spec, err := json.Marshal("name: heading\nstart_urls: [\"http://127.0.0.1:9/\"]\nitems:\n  - key: title\n    fields: {title: {css: " + sel + "}}\n")
		if err != nil {
			t.Fatal(err)
		}
		f.ok(t, `{"action":"pushspider","spec":`+string(spec)+`}`)
	}
	out := f.call(t, `{"action":"addschedule","name":"v3","spider":"heading","cron":"@daily","_version":"3"}`)
	if msg, _ := out["message"].(string); out["status"] != "error" || !strings.Contains(msg, `unknown version "3" of spider "heading" (its versions: 1, 2)`) {
		t.Fatalf("addschedule of version 3: %v", out)
	}
	f.ok(t, `{"action":"addschedule","name":"v1","spider":"heading","cron":"@daily","_version":"1"}`)
	g, err := sc.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("v1"), GroupName: aws.String("crawlq")})
	if err != nil {
		t.Fatal(err)
	}
	input := aws.ToString(g.Target.Input)
	var payload map[string]any
	if err := json.Unmarshal([]byte(input), &payload); err != nil || payload["version"] != "1" {
		t.Fatalf("schedule payload %s (%v): want version 1", input, err)
	}
	job := f.ok(t, input)["jobid"].(string)
	if j := f.ok(t, `{"action":"status","job":"`+job+`"}`)["job"].(map[string]any); j["version"] != "1" {
		t.Fatalf("the scheduled run: %v, want version 1", j)
	}
}

// motoScheduler returns an EventBridge Scheduler client on moto, with the schedule group "crawlq".
func motoScheduler(t *testing.T) *scheduler.Client {
	t.Helper()
	awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	sc := scheduler.NewFromConfig(cfg)
	if _, err := sc.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String("crawlq")}); err != nil {
		t.Fatal(err)
	}
	return sc
}
