package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"crawlq/internal/clock"
)

// PokeSource is the "source" of the api's poke payload, which the dispatch handler answers with
// Poke rather than a full Tick.
const PokeSource = "api"

// Poke is the tick the api asks for after each schedule: it starts workers for what is waiting
// now, publishes the events of runIDs (the new run's "scheduled", which the api leaves to it so
// that its answer does not wait for EventBridge), and waits for the jobs due within the
// lookahead, like Tick, but leaves rescue, the sweep, other runs' events, pruning and
// maintenance to the scheduled ticks. A full tick per poke made every schedule pay the whole
// maintenance (measured: 200 concurrent schedules through crawlq local, p50 latency 2.2 s against
// 0.37 s before the maintenance grew).
//
// Pokes that arrive while another one of this Dispatcher is promoting and fanning out join it:
// it goes round once more for them (their jobs committed before they poked, so that round sees
// them) and they return at once with Result.Coalesced. A burst of schedules through `crawlq
// local` then costs a few rounds, not one per schedule: 200 concurrent schedules made 200 rounds
// of promote, counts and live workers compete with the schedules themselves for the database.
// (On AWS each poke is a dispatch invocation of its own, and a Lambda environment runs one at a
// time, so there they do not join.) A poke whose round fails, or that has less than
// DeadlineMargin left before it would go round again, leaves the runs of that round to the next
// poke (and their events to the next tick, which publishes every run's) and counts the pokes it
// leaves in Result.HandedOver; a steady stream of pokes thus moves from one poke to the next
// instead of keeping one going until its context expires.
func (d *Dispatcher) Poke(ctx context.Context, runIDs []int64) (Result, error) {
	res, err := d.poke(ctx, runIDs)
	d.TestSignals.Poked.Send(Done{Result: res, Err: err})
	return res, err
}

// poke is Poke's work.
func (d *Dispatcher) poke(ctx context.Context, runIDs []int64) (Result, error) {
	res := Result{Invoked: map[string]int{}}
	runIDs, serving, ok := d.pokes.enter(runIDs)
	if !ok {
		res.Coalesced = true
		return res, nil
	}
	started := map[string]int{}
	for {
		if err := d.pokeRound(ctx, &res, started, runIDs); err != nil {
			res.HandedOver = d.pokes.abandon(runIDs, serving)
			return res, err
		}
		res.Joined += serving
		joined, more := d.pokes.next()
		if !more {
			break
		}
		runIDs, serving = joined.runs, joined.pokes
		if left, ok := clock.DeadlineIn(ctx); ok && left < d.cfg.DeadlineMargin {
			res.HandedOver = d.pokes.abandon(runIDs, serving)
			d.log.Warn("dispatch: poke near its deadline leaves the pokes that joined it to the next poke",
				"pokes", res.HandedOver, "runs", len(runIDs))
			break
		}
	}
	return res, d.wait(ctx, &res, started)
}

// pokeRound promotes, fans out and publishes the events of runIDs, adding what it did to res.
func (d *Dispatcher) pokeRound(ctx context.Context, res *Result, started map[string]int, runIDs []int64) error {
	n, err := d.cfg.Queue.Promote(ctx, d.cfg.Batch)
	res.Promoted += n
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	if err := d.fanOut(ctx, res, started); err != nil {
		return err
	}
	if d.cfg.PublishRuns != nil && len(runIDs) > 0 {
		n, err := d.cfg.PublishRuns(ctx, runIDs)
		d.recordEvents(res, n, err)
	}
	return nil
}

// pokeQueue lets one Poke at a time promote and fan out, and collects the pokes that arrive
// meanwhile for it to serve in one more round.
type pokeQueue struct {
	mu      sync.Mutex
	running bool
	joined  joinedPokes // since the running poke's current round began
}

// joinedPokes are pokes that joined a running one: how many, and their runs.
type joinedPokes struct {
	pokes int
	runs  []int64
}

// enter reports whether the caller is to run the poke, the runs it serves (its own, and those a
// poke that ended early left), and how many pokes it serves besides its own. Otherwise the caller
// has joined the running poke.
func (q *pokeQueue) enter(runIDs []int64) ([]int64, int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running {
		q.joined.pokes++
		q.joined.runs = append(q.joined.runs, runIDs...)
		return nil, 0, false
	}
	q.running = true
	runIDs = slices.Concat(runIDs, q.joined.runs) // a copy: the caller's slice is left alone
	serving := q.joined.pokes
	q.joined = joinedPokes{}
	return runIDs, serving, true
}

// next hands the running poke the pokes that joined it during its round, and reports whether
// there were any; when there were none, the poke is over and the next one runs itself.
func (q *pokeQueue) next() (joinedPokes, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.joined
	if j.pokes == 0 {
		q.running = false
		return j, false
	}
	q.joined = joinedPokes{}
	return j, true
}

// abandon ends a running poke that leaves runIDs, the runs of serving joined pokes, unserved (its
// round for them failed, or it is out of time). They, and the pokes that joined meanwhile, are
// left for the next poke to serve in its first round with its own; abandon returns how many
// pokes that is.
func (q *pokeQueue) abandon(runIDs []int64, serving int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running = false
	q.joined = joinedPokes{pokes: serving + q.joined.pokes, runs: slices.Concat(runIDs, q.joined.runs)}
	return q.joined.pokes
}
