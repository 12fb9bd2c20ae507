package crawl

// What this process knows about the runs whose pages it handles: how many pages of each it is
// handling now (so that only the last page of a burst checks whether its run has finished), and
// which runs have been asked to cancel (so that their pages here finish without fetching). Both
// are pruned when a run ends.

// markCancelled notes that run has been asked to cancel: its pages here finish without fetching.
func (c *Crawler) markCancelled(run int64) {
	c.mu.Lock()
	c.cancelled[run] = true
	c.mu.Unlock()
}

func (c *Crawler) isCancelled(run int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelled[run]
}

// pageStarted counts a page of run in as being handled in this process.
func (c *Crawler) pageStarted(run int64) {
	c.mu.Lock()
	c.active[run]++
	c.handling++
	if c.incoming > 0 {
		c.incoming--
	}
	c.mu.Unlock()
}

// activePages is how many pages of run this process is handling.
func (c *Crawler) activePages(run int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active[run]
}

// pageEnded counts out a page that ended without committing (a retry, a snooze, a lost lease).
func (c *Crawler) pageEnded(run int64) {
	c.mu.Lock()
	if c.active[run]--; c.active[run] <= 0 {
		delete(c.active, run)
	}
	c.handling--
	c.mu.Unlock()
}

// handedOver notes n page jobs that discover handed to this process's own workers: they start
// in a moment, and finishLoop waits for them as for pages being handled. The count is a hint (a
// page that starts takes one off, whichever it was), so it is never exact, only close.
func (c *Crawler) handedOver(n int) {
	c.mu.Lock()
	c.incoming += n
	c.mu.Unlock()
}

// othersHandled says whether pages are being handled here, or were just handed to this process,
// beyond the n in hand and those waiting to finish: pages that may join a batch soon.
func (c *Crawler) othersHandled(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handling+c.incoming > n+len(c.finishQ)
}

// settle counts out the pages of a committed batch and returns the runs that may have just
// finished: no other page of theirs is being handled here.
//
// Skipping the others is safe: a page still being handled is a running job of the run, so the run
// is not finished; when it ends, either it commits (and its own batch settles, and checks if it is
// the last) or its job stays unfinished (retried, snoozed, held by another worker) and is finished
// later, by whoever then checks. Only the last page of a burst costs a check, not every batch.
func (c *Crawler) settle(batch []*finishReq) []*runInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range batch {
		if c.active[r.ri.id]--; c.active[r.ri.id] <= 0 {
			delete(c.active, r.ri.id)
		}
	}
	c.handling -= len(batch)
	var check []*runInfo
	seen := map[int64]bool{}
	for _, r := range batch {
		id := r.ri.id
		if !seen[id] && c.active[id] == 0 {
			check = append(check, r.ri)
		}
		seen[id] = true
	}
	return check
}

// forgetRun drops what this process keeps about run once it finished (or was reopened by a
// redrive): its settings and its cancel mark. Its active count is already zero.
func (c *Crawler) forgetRun(run int64) {
	c.mu.Lock()
	delete(c.runs, run)
	delete(c.cancelled, run)
	c.mu.Unlock()
}
