package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
)

// waitSample is how many of a run's waiting jobs waitingFor looks at (the newest).
const waitSample = 200

// liveHorizon is how recently a worker must have heartbeated to count as alive (dispatch's).
const liveHorizon = time.Minute

// waitingFor says what a live run that has nothing running waits for, for --watch: its start
// time, the next page due (its host's delay turn, a retry's backoff with the error that put it
// off, or a host pause), a worker of its queue, room among the live ones, or a claim that is late. Empty when it
// waits for nothing (something of it runs, it has no waiting job, or its due job was due only a
// moment ago: claimGrace).
func waitingFor(ctx context.Context, n *node.Node, r *crawl.Run, waiting, running int64, now time.Time) (string, error) {
	if r.Finished() || running > 0 || waiting == 0 {
		return "", nil
	}
	jobs, err := n.Queue.List(ctx, queue.ListParams{ParentID: r.ID, States: []queue.State{queue.StateAvailable, queue.StateScheduled},
		Limit: waitSample})
	if err != nil {
		return "", err
	}
	var due, next *queue.Job
	for _, j := range jobs {
		if !j.RunAt.After(now) {
			if due == nil {
				due = j
			}
		} else if next == nil || j.RunAt.Before(next.RunAt) {
			next = j
		}
	}
	if due == nil && next != nil {
		in := next.RunAt.Sub(now).Round(time.Second)
		at := next.RunAt.Local().Format("15:04:05")
		if r.State == crawl.StatePending {
			return fmt.Sprintf("waits to start at %s (in %s)", at, in), nil
		}
		if hd, ok, err := hostPauseOf(ctx, n, next); err != nil {
			return "", err
		} else if ok {
			return fmt.Sprintf("waits: host %s is down (failing since %s, %d failed probes); its pages wait until %s (in %s), then one probes it; %s",
				hd.Host, hd.Since.Local().Format("15:04:05"), hd.Probes, hd.PausedUntil.Local().Format("15:04:05"),
				hd.PausedUntil.Sub(now).Round(time.Second), givesUp(hd, now)), nil
		}
		return fmt.Sprintf("waits: next page due at %s (in %s; %s)", at, in, putOff(ctx, n, r, next)), nil
	}
	if due == nil {
		return "", nil
	}
	alive, err := liveWorkers(ctx, n, due.Queue)
	if err != nil {
		return "", err
	}
	if alive == 0 {
		return "waits for a worker of queue " + due.Queue + ": none alive " + startOne(due.Queue), nil
	}
	return waitsOnLiveWorkers(ctx, n, due, alive, now)
}

// putOff says why page job j of run r waits for a later time: a retry's backoff when an attempt
// of it failed (with the error); else its host's turn, which is the spider's delay between
// requests to one host when it has one (a busy host, proxy or item sink, and a first soft failure
// also put a page back without recording an error).
func putOff(ctx context.Context, n *node.Node, r *crawl.Run, j *queue.Job) string {
	if k := len(j.Errors); k > 0 {
		return "a retry's backoff after: " + clipMsg(j.Errors[k-1].Error, 80)
	}
	if s, err := n.Crawler.RunSettings(ctx, r.ID); err == nil && s.Delay > 0 {
		return fmt.Sprintf("its host's turn: the spider waits %s between requests to a host", s.Delay)
	}
	return "put back without an error: its host, proxy or item sink was busy, or a first soft failure is retried"
}

// claimGrace is how long a due job may go unclaimed by live workers before a run is said to wait
// for them: an idle worker claims within its poll interval (200 ms by default) or at once when
// poked, so a run scheduled a moment ago waits for nothing yet.
const claimGrace = 5 * time.Second

// waitsOnLiveWorkers says what a due job of a run with nothing running waits for when its queue
// has live workers: room, when they run other jobs; else a claim that is late (a stuck worker, or
// one whose database reads fail). Empty within claimGrace of the job becoming due.
func waitsOnLiveWorkers(ctx context.Context, n *node.Node, due *queue.Job, alive int, now time.Time) (string, error) {
	dueFor := now.Sub(due.RunAt)
	if dueFor < claimGrace {
		return "", nil
	}
	busy, err := n.Queue.List(ctx, queue.ListParams{Queue: due.Queue, States: []queue.State{queue.StateRunning}, Limit: waitSample})
	if err != nil {
		return "", err
	}
	since := fmt.Sprintf("due since %s (%s)", due.RunAt.Local().Format("15:04:05"), dueFor.Round(time.Second))
	if len(busy) > 0 {
		many := strconv.Itoa(len(busy))
		if len(busy) == waitSample {
			many = "at least " + many
		}
		return fmt.Sprintf("waits for room: %d live worker(s) of queue %s are busy with %s job(s) of other runs; %s", alive, due.Queue, many, since), nil
	}
	return fmt.Sprintf("waits for a worker to claim it: %d live worker(s) of queue %s run nothing, yet none has claimed it (see their logs); %s", alive, due.Queue, since), nil
}

// liveWorkers counts the workers of queue q seen alive within liveHorizon.
func liveWorkers(ctx context.Context, n *node.Node, q string) (int, error) {
	live, err := n.Queue.LiveWorkers(ctx, q, liveHorizon)
	if err != nil {
		return 0, err
	}
	alive := 0
	for _, k := range live[q] {
		alive += k
	}
	return alive, nil
}

// startOne says, in parentheses, what starts a worker of queue q: crawlq worker works only the
// crawl queue unless told otherwise, and the long queue (spiders with runtime ecs: browser pages,
// commands) is the runners'.
func startOne(q string) string {
	if q == "long" {
		return "(a dispatch starts a runner for it: crawlq local at once, on AWS within the minute; here: crawlq runner, or crawlq worker --queues crawl,long, which works its declarative spiders but no command)"
	}
	return fmt.Sprintf("(a dispatch starts one: crawlq local at once, on AWS within the minute; or crawlq worker --queues %s)", q)
}

// noteQueue says queueNote's note of a run just scheduled on w and in the run's log (crawlq logs
// RUN_ID), where one reading why the run never starts finds it.
func noteQueue(ctx context.Context, w io.Writer, n *node.Node, runID int64, q string) error {
	note, err := queueNote(ctx, n, runID, q)
	if err != nil || note == "" {
		return err
	}
	fmt.Fprintln(w, note)
	return runlog.Postgres{Pool: n.Queue.Pool()}.Append(ctx, runID, []string{note})
}

// queueNote is what to say of a run just scheduled on queue q, other than the default crawl queue,
// that no live worker works; "" when one does.
func queueNote(ctx context.Context, n *node.Node, runID int64, q string) (string, error) {
	if q == spider.DefaultQueue {
		return "", nil // worked by every crawlq worker, crawlq local and the deployed workers
	}
	alive, err := liveWorkers(ctx, n, q)
	if err != nil || alive > 0 {
		return "", err
	}
	return fmt.Sprintf("run %d waits on queue %s, which no live worker works now %s", runID, q, startOne(q)), nil
}

// hostPauseOf returns the pause of the host of page job j, when it is a page whose host is paused.
func hostPauseOf(ctx context.Context, n *node.Node, j *queue.Job) (crawl.HostDown, bool, error) {
	var a struct {
		URL string `json:"url"`
	}
	if j.Kind != "page" || json.Unmarshal(j.Args, &a) != nil || a.URL == "" {
		return crawl.HostDown{}, false, nil
	}
	return n.Crawler.HostPause(ctx, j.ParentID, a.URL)
}

// givesUp says when the run stops waiting for a down host: its pages die at the first failed
// probe once the host has been down for the run's down limit.
func givesUp(hd crawl.HostDown, now time.Time) string {
	if !hd.GivesUpAt.After(now) {
		return fmt.Sprintf("it has been down past the run's limit of %s: its pages die at the next failed probe", hd.DownLimit)
	}
	return fmt.Sprintf("the run gives up on it if it is still down at %s (in %s; down limit %s)",
		hd.GivesUpAt.Local().Format("15:04:05"), hd.GivesUpAt.Sub(now).Round(time.Second), hd.DownLimit)
}

// sayAgain is how often a line that changed only in its figures (a wait's countdowns, the probes
// so far, a run's pages/s) is printed again; one that changed otherwise is printed at once.
const sayAgain = 30 * time.Second

// sayer decides which of a stream of status lines are printed, so a long wait prints a line when
// what it waits for changes and every sayAgain, not one per reading.
type sayer struct {
	shape string
	at    time.Time
}

// due reports whether line should be printed at now, and if so remembers it.
func (s *sayer) due(line string, now time.Time) bool {
	shape := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, line)
	if shape == s.shape && now.Sub(s.at) < sayAgain {
		return false
	}
	s.shape, s.at = shape, now
	return true
}

// clipMsg keeps the first n bytes of s for a message, marking a cut with "...", and never leaves a
// character cut in two (or any invalid UTF-8) for the terminal to show as garbage.
func clipMsg(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
