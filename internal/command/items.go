package command

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/items"
)

// itemResult is what the item reader achieved.
type itemResult struct {
	n, skipped int
	bytes      int64
	err        error
}

// itemReading is a run's item reader, started with the command: it reads the item pipe into
// the pipeline until the pipe ends.
type itemReading struct {
	done   chan itemResult
	cancel context.CancelFunc
	// exited says the command's main process is gone: from then on each read of the pipe has a
	// deadline, so that a process that escaped the group cannot hold the run open.
	exited atomic.Bool
}

// startItems starts reading f. Its context outlives ctx: a stopping run still writes what it
// read, within the kill grace (awaitItems).
func (r *Runner) startItems(ctx context.Context, run *crawl.Run, f *os.File, log *slog.Logger) *itemReading {
	ictx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ir := &itemReading{done: make(chan itemResult, 1), cancel: cancel}
	go func() { ir.done <- r.readItems(ictx, run, f, &ir.exited, log) }()
	return ir
}

// awaitItems waits for the item reader once the command has exited, unless supervise already
// saw it end. A stopped run gets its stop's grace to write what was read (a cancelled Scrapy run
// its ShutdownGrace: what it wrote while it shut down is kept); a run that ended by itself waits
// for every item, unless ctx ends meanwhile, which makes it a stopped run.
func (r *Runner) awaitItems(ctx context.Context, ir *itemReading, end *ending) {
	defer ir.cancel()
	if end.itemsOver {
		return
	}
	if end.reason != nil {
		t := time.AfterFunc(end.grace, ir.cancel)
		end.items = <-ir.done
		t.Stop()
		return
	}
	select {
	case end.items = <-ir.done:
	case <-ctx.Done():
		ir.cancel()
		end.items = <-ir.done
		end.reason = fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx))
	}
}

// readItems reads JSON Lines from f into the pipeline until EOF (or the read deadline once the
// command has exited), in batches.
func (r *Runner) readItems(ctx context.Context, run *crawl.Run, f *os.File, exited *atomic.Bool, log *slog.Logger) itemResult {
	// Small on purpose: with the reader's buffer and one batch, this bounds the memory held.
	ch := make(chan items.Item, 16)
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var skipped atomic.Int64
	readDone := make(chan error, 1)
	go func() {
		defer close(ch)
		readDone <- r.readLines(readCtx, run, f, exited, ch, &skipped, log)
	}()
	res := r.writeBatches(ctx, run, ch)
	if res.err == nil {
		// ch is closed, so the reader has returned.
		res.err = <-readDone
	}
	// On a write error the reader is left to end by itself: it stops at its next item
	// (readCtx) or when Run closes the pipe, and Run must learn of the error now to kill the
	// command rather than wait for it.
	res.skipped = int(skipped.Load())
	return res
}

func (r *Runner) readLines(ctx context.Context, run *crawl.Run, f *os.File, exited *atomic.Bool, ch chan<- items.Item, skipped *atomic.Int64, log *slog.Logger) error {
	br := bufio.NewReaderSize(f, r.cfg.MaxItemBytes)
	lineNo := 0
	dropping := false
	skip := func(why string) {
		if skipped.Add(1) <= 10 {
			log.Warn("skipped an item line", "line", lineNo, "why", why)
		}
	}
	for {
		if exited.Load() {
			// Refreshed per read: time spent waiting on the pipeline must not eat it.
			f.SetReadDeadline(clock.Deadline(r.cfg.KillGrace))
		}
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			full := errors.Is(err, bufio.ErrBufferFull)
			switch {
			case dropping:
				dropping = full
			case full:
				lineNo++
				dropping = true
				skip(fmt.Sprintf("longer than %d bytes", r.cfg.MaxItemBytes))
			default:
				lineNo++
				it, why := r.parseItem(run, bytes.TrimSpace(line))
				if why != "" {
					if why != "blank" {
						skip(why)
					}
					break
				}
				select {
				case ch <- it:
				case <-ctx.Done():
					return nil
				}
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case errors.Is(err, os.ErrDeadlineExceeded):
				log.Warn("item pipe still open after the command exited (a process escaped its group?); stopped reading")
				return nil
			default:
				return fmt.Errorf("read items: %w", err)
			}
		}
	}
}

// parseItem turns one line into an item, or says why not ("blank" for an empty line).
func (r *Runner) parseItem(run *crawl.Run, line []byte) (items.Item, string) {
	if len(line) == 0 {
		return items.Item{}, "blank"
	}
	var fields map[string]json.RawMessage
	if line[0] != '{' || json.Unmarshal(line, &fields) != nil {
		return items.Item{}, "not a JSON object"
	}
	it := items.Item{RunID: run.ID, Spider: run.Spider, Data: json.RawMessage(bytes.Clone(line))}
	if raw, ok := fields["key"]; ok {
		var s string
		var n json.Number
		if json.Unmarshal(raw, &s) == nil {
			it.Key = s
		} else if json.Unmarshal(raw, &n) == nil {
			it.Key = n.String()
		}
	}
	if it.Key == "" {
		sum := sha256.Sum256(line)
		it.Key = "line:" + hex.EncodeToString(sum[:16])
	} else if len(it.Key) > items.MaxKeyLen {
		sum := sha256.Sum256([]byte(it.Key))
		it.Key = "key:" + hex.EncodeToString(sum[:])
	}
	if raw, ok := fields["url"]; ok {
		var u string
		if json.Unmarshal(raw, &u) == nil && len(u) <= items.MaxURLLen {
			it.URL = u
		}
	}
	if err := it.Validate(); err != nil {
		return items.Item{}, err.Error()
	}
	return it, ""
}

// writeBatches writes items from ch to the pipeline until ch closes or a write fails for good.
func (r *Runner) writeBatches(ctx context.Context, run *crawl.Run, ch <-chan items.Item) itemResult {
	var res itemResult
	batch := make([]items.Item, 0, r.cfg.BatchSize)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := r.write(ctx, batch); err != nil {
			return err
		}
		var b int64
		for _, it := range batch {
			b += int64(len(it.Data))
		}
		res.n += len(batch)
		res.bytes += b
		if r.cfg.RecordItems != nil {
			if err := r.cfg.RecordItems(ctx, run.ID, len(batch), b); err != nil {
				r.log.Warn("record item stats", "run", run.ID, "err", err)
			}
		}
		batch = batch[:0]
		return nil
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var timerC <-chan time.Time
		if len(batch) > 0 {
			timerC = timer.C
		}
		select {
		case it, ok := <-ch:
			if !ok {
				res.err = flush()
				return res
			}
			batch = append(batch, it)
			if len(batch) == 1 {
				timer.Reset(r.cfg.FlushInterval)
			}
			if len(batch) >= r.cfg.BatchSize {
				timer.Stop()
				if res.err = flush(); res.err != nil {
					return res
				}
			}
		case <-timerC:
			if res.err = flush(); res.err != nil {
				return res
			}
		}
	}
}

// write sends a batch, waiting out backpressure; an item the sink rejects is dropped (logged),
// not a reason to fail the whole run.
func (r *Runner) write(ctx context.Context, batch []items.Item) error {
	for {
		err := r.cfg.Pipeline.Write(ctx, batch)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, items.ErrBackpressure):
			continue // the command is blocked in its write meanwhile: that is the backpressure
		case errors.Is(err, items.ErrInvalidItem) && len(batch) > 1:
			for i := range batch {
				if err := r.write(ctx, batch[i:i+1]); err != nil {
					return err
				}
			}
			return nil
		case errors.Is(err, items.ErrInvalidItem):
			r.log.Warn("sink rejected an item", "run", batch[0].RunID, "key", batch[0].Key, "err", err)
			return nil
		default:
			return err
		}
	}
}
