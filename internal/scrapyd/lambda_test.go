package scrapyd_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"crawlq/internal/api"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/lambdafn"
	"crawlq/internal/node"
	"crawlq/internal/runlog"
	"crawlq/internal/scrapyd"
)

// TestFunctionURL sends the api function a function URL event (as Lambda delivers one) and a
// plain JSON payload: the first is answered by the Scrapyd API, the second by the JSON api.
func TestFunctionURL(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Pipeline.Close(context.Background()) })
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := scrapyd.New(scrapyd.Config{API: a, Store: n.Store, Pool: pool, RunLog: runlog.Postgres{Pool: pool}, Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	h := scrapyd.LambdaHandler(scrapyd.FunctionURL{Handler: srv.Handler()}, lambdafn.API(a))
	ctx := context.Background()
	event := func(method, path, query, body string, auth bool) json.RawMessage {
		ev := events.LambdaFunctionURLRequest{Version: "2.0", RawPath: path, RawQueryString: query,
			Headers: map[string]string{"content-type": "application/x-www-form-urlencoded"}, Body: base64.StdEncoding.EncodeToString([]byte(body)),
			IsBase64Encoded: true}
		ev.RequestContext.HTTP.Method = method
		if auth {
			ev.Headers["authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))
		}
		b, _ := json.Marshal(ev)
		return b
	}
	call := func(payload json.RawMessage) events.LambdaFunctionURLResponse {
		t.Helper()
		out, err := h(ctx, payload)
		if err != nil {
			t.Fatal(err)
		}
		res, ok := out.(events.LambdaFunctionURLResponse)
		if !ok {
			t.Fatalf("answer %T, want a function URL response", out)
		}
		return res
	}
	res := call(event("GET", "/listspiders.json", "project=default", "", true))
	if res.StatusCode != 200 || !strings.Contains(res.Body, `"demo"`) || !strings.Contains(res.Body, `"status":"ok"`) {
		t.Fatalf("listspiders: %+v", res)
	}
	res = call(event("POST", "/schedule.json", "", "project=default&spider=demo&base_url=http%3A%2F%2F127.0.0.1%3A9&jobid=fn-url-1", true))
	if res.StatusCode != 200 || !strings.Contains(res.Body, `"jobid":"fn-url-1"`) {
		t.Fatalf("schedule: %+v", res)
	}
	// A jobid of digits would be taken for a run id by status and cancel: it is refused, as the
	// JSON api refuses it, and nothing is scheduled.
	for _, jobid := range []string{"1", "12345", "a+b%2Fc"} {
		res = call(event("POST", "/schedule.json", "", "project=default&spider=demo&jobid="+jobid, true))
		if res.StatusCode != 200 || !strings.Contains(res.Body, `"status":"error"`) || !strings.Contains(res.Body, `jobid`) {
			t.Fatalf("schedule with jobid %s: %+v; want an error naming jobid", jobid, res)
		}
	}
	// cancel.json names a project: a job of another project is not cancelled.
	res = call(event("POST", "/cancel.json", "", "project=nosuch&job=fn-url-1", true))
	if !strings.Contains(res.Body, `"status":"error"`) || !strings.Contains(res.Body, `in project \"nosuch\"`) {
		t.Fatalf("cancel in another project: %+v", res)
	}
	res = call(event("GET", "/status.json", "project=default&job=fn-url-1", "", true))
	if !strings.Contains(res.Body, `"currstate":"pending"`) {
		t.Fatalf("status after a refused cancel: %+v", res)
	}
	res = call(event("GET", "/daemonstatus.json", "", "", true))
	if !strings.Contains(res.Body, `"pending":1`) || !strings.Contains(res.Body, `"jobs_pending":`) || !strings.Contains(res.Body, `"jobs_running":`) {
		t.Fatalf("daemonstatus: %+v; want runs and jobs counted", res)
	}
	if res = call(event("GET", "/daemonstatus.json", "", "", false)); res.StatusCode != 401 || !strings.Contains(res.Body, `"status":"error"`) {
		t.Fatalf("no credentials: %+v", res)
	}
	// A CORS preflight carries no credentials: answered with Scrapyd's headers and no data.
	if res = call(event("OPTIONS", "/listjobs.json", "", "", false)); res.StatusCode != 204 || res.Body != "" ||
		res.Headers["Access-Control-Allow-Origin"] != "*" || res.Headers["Access-Control-Allow-Methods"] != "OPTIONS, HEAD, GET" {
		t.Fatalf("preflight: %+v", res)
	}
	if res = call(event("OPTIONS", "/jobs", "", "", false)); res.StatusCode != 401 {
		t.Fatalf("OPTIONS on a page without credentials: %+v; want 401", res)
	}
	// An answer larger than a function URL answer holds is refused with a clear error (Lambda's
	// own would say nothing useful), not sent cut short; a smaller one is whole.
	id, err := n.Store.JobIDTaken(ctx, "fn-url-1")
	if err != nil || id == 0 {
		t.Fatalf("job fn-url-1: %d %v", id, err)
	}
	sink := items.NewPostgresSink(pool)
	pad := strings.Repeat(`\"q\"`, 20)
	write := func(from, to int) {
		for lo := from; lo < to; lo += 1000 {
			batch := make([]items.Item, 0, 1000)
			for k := lo; k < lo+1000 && k < to; k++ {
				batch = append(batch, items.Item{RunID: id, Spider: "demo", Key: fmt.Sprintf("k%06d", k), URL: "http://127.0.0.1/",
					Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, k, pad))})
			}
			if err := sink.Write(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 1000)
	if res = call(event("GET", "/items/default/demo/fn-url-1.jl", "", "", true)); res.StatusCode != 200 || strings.Count(res.Body, "\n") != 1000 {
		t.Fatalf("items through the function URL: %d, %d lines", res.StatusCode, strings.Count(res.Body, "\n"))
	}
	write(1000, 50000) // about 6 MB once JSON-escaped
	if res = call(event("GET", "/items/default/demo/fn-url-1.jl", "", "", true)); res.StatusCode != 413 || !strings.Contains(res.Body, "larger than a Lambda function URL answer holds") {
		t.Fatalf("large items through the function URL: %d %.300s", res.StatusCode, res.Body)
	}
	// A plain payload is the JSON api, as before.
	out, err := h(ctx, json.RawMessage(`{"action":"status","job":"fn-url-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := out.(json.RawMessage)
	if !strings.Contains(string(raw), `"currstate":"pending"`) {
		t.Fatalf("json api: %s", raw)
	}
}

// A handler that gives up after writing part of an answer (as /items does when a read fails
// midway) gets an error through the function URL, not the part that looks whole.
func TestFunctionURLAnswerCutShort(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("{\"n\":1}\n"))
		panic(http.ErrAbortHandler)
	})
	ev := events.LambdaFunctionURLRequest{RawPath: "/items/p/s/j.jl"}
	ev.RequestContext.HTTP.Method = "GET"
	res, err := scrapyd.ServeFunctionURL(context.Background(), h, ev)
	if err != nil || res.StatusCode != http.StatusBadGateway || !strings.Contains(res.Body, "failed midway") {
		t.Fatalf("cut-short answer: %+v %v; want a 502 saying so", res, err)
	}
}

// An answer larger than a function URL holds fails the handler's writes once past the bound,
// io.WriteString's included, so a large listing stops being built in memory; the client gets
// the 413 that says what to do instead.
func TestFunctionURLAnswerTooLargeFailsWriteString(t *testing.T) {
	t.Parallel()
	chunk := strings.Repeat("x", 1<<20)
	var written int
	var werr error
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 2 * scrapyd.MaxFunctionURLAnswer / len(chunk) {
			if _, werr = io.WriteString(w, chunk); werr != nil {
				return
			}
			written += len(chunk)
		}
	})
	ev := events.LambdaFunctionURLRequest{RawPath: "/logs/"}
	ev.RequestContext.HTTP.Method = "GET"
	res, err := scrapyd.ServeFunctionURL(context.Background(), h, ev)
	if err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("too large answer: status %d %v; want 413", res.StatusCode, err)
	}
	if werr == nil || written > scrapyd.MaxFunctionURLAnswer {
		t.Fatalf("io.WriteString wrote %d bytes past the %d-byte bound without an error", written, scrapyd.MaxFunctionURLAnswer)
	}
}
