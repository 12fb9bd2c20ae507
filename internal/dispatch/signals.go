package dispatch

import "crawlq/internal/testwait"

// TestSignals are what a Dispatcher tells a waiting test (testwait.Signal: off unless Init'ed),
// so that a test waits for a tick or a poke to end instead of polling for its effects. Several
// ticks may run at once; each sends when it ends.
type TestSignals struct {
	// Ticked is sent as each Tick returns, with what it did and its error.
	Ticked testwait.Signal[Done]
	// Poked is sent as each Poke returns (a coalesced one too), with what it did and its error.
	Poked testwait.Signal[Done]
}

// Done is what a tick or a poke did, as TestSignals tell it.
type Done struct {
	Result Result
	Err    error
}
