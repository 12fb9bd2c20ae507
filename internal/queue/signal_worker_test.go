package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"crawlq/internal/queue"
)

// A worker tells a test what became of each job it ran, once the outcome is written: the test
// waits on that instead of polling the jobs' rows.
func TestWorkerOutcomeSignals(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx := ctxT(t)
	want := map[string]struct {
		what  string
		state queue.State
	}{
		"ok":     {queue.OutcomeCompleted, ""},
		"retry":  {queue.OutcomeFailed, queue.StateScheduled},
		"dead":   {queue.OutcomeFailed, queue.StateDead},
		"snooze": {queue.OutcomeSnoozed, ""},
		"cancel": {queue.OutcomeCancelled, ""},
		"defer":  {queue.OutcomeDeferred, ""},
	}
	ids := map[int64]string{}
	for name := range want {
		r := enqueue(t, c, queue.EnqueueParams{Queue: "q", Kind: "k", Args: json.RawMessage(`"` + name + `"`)})
		ids[r.ID] = name
	}
	boom := errors.New("boom")
	signals := &queue.WorkerTestSignals{}
	signals.Outcome.Init()
	w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", Concurrency: 2, TestSignals: signals},
		func(ctx context.Context, j *queue.Job) error {
			var name string
			if err := json.Unmarshal(j.Args, &name); err != nil {
				return err
			}
			switch name {
			case "retry":
				return boom
			case "dead":
				return queue.Permanent(boom)
			case "snooze":
				return queue.Snooze(time.Hour)
			case "cancel":
				return queue.Cancel(boom)
			case "defer":
				return queue.Defer(boom)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for len(ids) > 0 {
		o := signals.Outcome.Wait(t)
		name, ok := ids[o.Job]
		if !ok {
			continue // the deferred job's next run
		}
		w := want[name]
		if o.What != w.what || o.State != w.state || (name == "ok") != (o.Err == nil) {
			t.Errorf("job %q: outcome %+v; want %s %q", name, o, w.what, w.state)
		}
		if j := get(t, c, o.Job); (name == "ok") != (j.State == queue.StateSucceeded) {
			t.Errorf("job %q is %s once its outcome was signalled", name, j.State)
		}
		delete(ids, o.Job)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
