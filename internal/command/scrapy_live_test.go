package command_test

import (
	"context"
	"fmt"
	"testing"

	"crawlq/internal/command"
	"crawlq/internal/crawl"
	"crawlq/internal/testwait"
)

// A real Scrapy run's items reach crawlq as Scrapy scrapes them, not when its spider closes:
// while the run's last page is still held, the run already counts the items of the others.
// Scrapy's file feed storage buffers its writes to the pipe; crawlq_scrapy flushes it after each
// item, so `crawlq run ID --watch`, status.json and ScrapydWeb see a Scrapy run's items grow.
func TestScrapyItemsArriveWhileTheRunRuns(t *testing.T) {
	t.Parallel()
	site := serveHeldSite(t, 30)
	se := startScrapy(t, command.Config{}, nil)
	id := se.scheduleCatalog(t, site.url)
	<-site.held
	live := testwait.For(t, fmt.Sprintf("run %d counts the 29 items scraped before its held page", id), func() (*crawl.Run, bool) {
		r, err := se.node.Crawler.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r, r.Stats.Items >= 29 || r.Finished()
	})
	if live.Finished() {
		t.Fatalf("run %d finished (%s) while its last page was held; want it running", id, live.State)
	}
	site.release()
	if r := se.wait(t, id); r.State != crawl.StateSucceeded || r.Stats.Items != 30 {
		t.Errorf("run %d: %s with %d items; want succeeded with 30", id, r.State, r.Stats.Items)
	}
}
