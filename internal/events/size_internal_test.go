package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"crawlq/internal/monitor"
)

// An event of a run with a huge error and thousands of fields still fits EventBridge's limit,
// keeping what a rule routes on and the failed monitors.
func TestEncodeDetailFits(t *testing.T) {
	d := &Detail{RunID: 7, Spider: "s", State: "succeeded", Outcome: "monitors_failed", Error: strings.Repeat("e", 100_000),
		FieldCoverage: map[string]int64{}, Monitors: &MonitorsDetail{Status: "failed", Results: []monitor.Result{
			{Monitor: "min_items", Status: "failed", Message: "0 items"}, {Monitor: "max_error_rate", Status: "passed"}}}}
	for i := range 5000 {
		d.FieldCoverage[fmt.Sprintf("field_with_a_long_name_%d", i)] = int64(i)
	}
	body, err := encodeDetail(d)
	if err != nil || len(body) > maxDetail {
		t.Fatalf("%d bytes, %v", len(body), err)
	}
	var back Detail
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Truncated || back.Outcome != "monitors_failed" || back.RunID != 7 || len(back.Monitors.Results) != 1 || back.FieldCoverage != nil {
		t.Fatalf("truncated detail %+v", back)
	}
	small := &Detail{RunID: 1, State: "running"}
	if body, _ := encodeDetail(small); strings.Contains(string(body), "truncated") {
		t.Fatalf("a small detail was truncated: %s", body)
	}
}

func TestFittingSplitsBySize(t *testing.T) {
	e := func(n int) ebtypes.PutEventsRequestEntry {
		return ebtypes.PutEventsRequestEntry{Source: aws.String("crawlq"), DetailType: aws.String(DetailType),
			Detail: aws.String(strings.Repeat("x", n)), EventBusName: aws.String("default")}
	}
	if n := fitting([]ebtypes.PutEventsRequestEntry{e(60000), e(60000), e(60000), e(60000), e(60000)}); n != 4 {
		t.Fatalf("fitting %d, want 4 of 60 KB", n)
	}
	if n := fitting([]ebtypes.PutEventsRequestEntry{e(300000), e(10)}); n != 1 {
		t.Fatalf("an oversized first entry goes alone (and fails alone): %d", n)
	}
	if n := fitting([]ebtypes.PutEventsRequestEntry{e(10), e(10)}); n != 2 {
		t.Fatalf("fitting %d", n)
	}
}
