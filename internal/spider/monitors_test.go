package spider_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"crawlq/internal/spider"
)

const monitoredSpec = `
name: shop
start_urls: ["http://127.0.0.1:8088/"]
items:
  - key: sku
    fields:
      sku: {css: span.sku}
      title: {css: h1}
`

func TestMonitorsParsed(t *testing.T) {
	spec, err := spider.ParseSpec([]byte(monitoredSpec+`
monitors:
  min_items: 5
  max_error_rate: 0.1
  field_coverage: {title: 0.95}
  items_vs_median: {runs: 5, within_percent: 30}
`), "shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := spec.Monitors
	if *m.MinItems != 5 || *m.MaxErrorRate != 0.1 || m.FieldCoverage["title"] != 0.95 || m.ItemsVsMedian.Runs != 5 || m.ItemsVsMedian.WithinPercent != 30 {
		t.Fatalf("monitors %+v", m)
	}
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"shop.yaml": {Data: []byte(monitoredSpec + "monitors: {min_items: 5}\n")}}); err != nil {
		t.Fatal(err)
	}
	if got, err := reg.Monitors("shop", ""); err != nil || got.MinItems == nil || *got.MinItems != 5 {
		t.Fatalf("registry monitors %+v %v", got, err)
	}
	if got, err := reg.Monitors("nobody", ""); !errors.Is(err, spider.ErrUnknownSpider) || !got.Empty() {
		t.Fatalf("an unknown spider's monitors: %+v %v", got, err)
	}
}

// Every mistake in a monitors block is refused, each named by its field path.
func TestBadMonitorsRefusedByPath(t *testing.T) {
	_, err := spider.ParseSpec([]byte(monitoredSpec+`
monitors:
  min_items: -1
  max_error_rate: 1.5
  field_coverage: {titel: 0.9, sku: 0, title: 95}
  items_vs_median: {runs: 0, within_percent: -5}
`), "shop.yaml")
	var ve *spider.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v, want a ValidationError", err)
	}
	want := []string{"monitors.min_items", "monitors.max_error_rate", "monitors.field_coverage.titel",
		"monitors.field_coverage.sku", "monitors.field_coverage.title", "monitors.items_vs_median.runs",
		"monitors.items_vs_median.within_percent"}
	paths := map[string]bool{}
	for _, fe := range ve.Errors {
		paths[fe.Path] = true
	}
	for _, p := range want {
		if !paths[p] {
			t.Errorf("no error at %s in %v", p, err)
		}
	}
	if len(ve.Errors) != len(want) {
		t.Errorf("%d errors, want %d: %v", len(ve.Errors), len(want), err)
	}
	if !strings.Contains(err.Error(), `"titel" is not a field of any items rule`) {
		t.Errorf("message: %v", err)
	}
	// Unknown monitor kinds and wrong types are refused by the decoder, with their line.
	_, err = spider.ParseSpec([]byte(monitoredSpec+"monitors:\n  min_itemz: 3\n  max_error_rate: lots\n"), "shop.yaml")
	if err == nil || !strings.Contains(err.Error(), "min_itemz") || !strings.Contains(err.Error(), "lots") {
		t.Fatalf("unknown monitor and bad type: %v", err)
	}
	// A command spider's fields are unknown here: any valid name goes.
	if _, err := spider.ParseSpec([]byte("name: cmd\nkind: command\ncommand: [scrapy, crawl, x]\nmonitors: {field_coverage: {anything: 0.5}}\n"), "cmd.yaml"); err != nil {
		t.Fatal(err)
	}
}
