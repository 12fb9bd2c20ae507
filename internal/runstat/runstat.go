// Package runstat reads a run's stored counters one way for every reader of them: a run as the
// crawl reads it (internal/crawl: crawlq run, the api, the metrics) and the run row a run event
// carries (internal/events: the report, EventBridge). A host pause is a wait, not an error: it has
// a counter of its own (host_pauses), and errors_by_kind counts outcomes, not waits.
package runstat

// legacyHostPaused is the errors_by_kind key a host pause was counted under before host_pauses
// had a column. The migration that added it (run_host_pauses) moved the stored runs' and stat
// rows' counts; a run event's snapshot taken before it still has the key, and a worker of the
// previous release writes it while a deploy rolls, so it is read as host pauses wherever found.
const legacyHostPaused = "host_paused"

// HostPauses returns a run's host pauses: stored (its host_pauses) plus any byKind still counts
// under the legacy key, which it removes from byKind.
func HostPauses(stored int64, byKind map[string]int64) int64 {
	n := stored + byKind[legacyHostPaused]
	delete(byKind, legacyHostPaused)
	return n
}
