package runlog_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/runlog"
)

// exercise checks a Store: order, cursors, runs kept apart, hostile lines stored cleanly.
func exercise(t *testing.T, s runlog.Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.Append(ctx, 1, []string{"one", "two"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, 2, []string{"other run"}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", runlog.MaxLineBytes+100)
	if err := s.Append(ctx, 1, []string{"bad \xff utf8 and \x00 nul", long}); err != nil {
		t.Fatal(err)
	}
	all, err := runlog.ReadAll(ctx, s, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || all[0].Text != "one" || all[1].Text != "two" || !strings.HasPrefix(all[2].Text, "bad ") ||
		!strings.HasSuffix(all[3].Text, "[truncated]") || len(all[3].Text) > runlog.MaxLineBytes+20 {
		t.Fatalf("run 1 log: %q", all)
	}
	// Reading on from the last cursor finds nothing new, then exactly what was added.
	_, cur, err := s.Read(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		lines, next, err := s.Read(ctx, 1, cur)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			break
		}
		cur = next
	}
	if err := s.Append(ctx, 1, []string{"later"}); err != nil {
		t.Fatal(err)
	}
	lines, _, err := s.Read(ctx, 1, cur)
	if err != nil || len(lines) != 1 || lines[0].Text != "later" {
		t.Fatalf("read on: %q %v", lines, err)
	}
	other, err := runlog.ReadAll(ctx, s, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != 1 || other[0].Text != "other run" {
		t.Fatalf("run 2 log: %q", other)
	}
	if none, err := runlog.ReadAll(ctx, s, 99, 0); err != nil || len(none) != 0 {
		t.Fatalf("run without a log: %q %v", none, err)
	}
	// A line keeps the time what it says happened, not the time it was written.
	died := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	if err := runlog.AppendAt(ctx, s, 3, []runlog.Entry{{At: died, Text: "page died"}, {At: died.Add(time.Second), Text: "later"}}); err != nil {
		t.Fatal(err)
	}
	timed, err := runlog.ReadAll(ctx, s, 3, 0)
	if err != nil || len(timed) != 2 || !timed[0].At.Equal(died) || timed[0].Text != "page died" || !timed[1].At.Equal(died.Add(time.Second)) {
		t.Fatalf("timed lines %+v %v; want their own times, %s and a second later", timed, err, died)
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	exercise(t, runlog.Postgres{Pool: dbtest.Pool(t), Batch: 2})
}

func TestCloudWatchMoto(t *testing.T) {
	awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	cl := cloudwatchlogs.NewFromConfig(cfg)
	if _, err := cl.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String("/crawlq/runs")}); err != nil {
		t.Fatal(err)
	}
	exercise(t, runlog.CloudWatch{Client: cl, Group: "/crawlq/runs"})
}

// TestFollow tails a log while lines are written and stops once the run is done and read out.
func TestFollow(t *testing.T) {
	t.Parallel()
	s := runlog.Postgres{Pool: dbtest.Pool(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var finished atomic.Bool
	go func() {
		for i := range 20 {
			if err := s.Append(ctx, 7, []string{fmt.Sprint("line ", i)}); err != nil {
				t.Error(err)
			}
			time.Sleep(5 * time.Millisecond) // paces the writer, so Follow reads while lines arrive
		}
		finished.Store(true)
	}()
	var got []string
	err := runlog.Follow(ctx, s, 7, "", 10*time.Millisecond, func(context.Context) (bool, error) { return finished.Load(), nil },
		func(l runlog.Line) error { got = append(got, l.Text); return nil })
	if err != nil || len(got) != 20 || got[0] != "line 0" || got[19] != "line 19" {
		t.Fatalf("follow: %v %q", err, got)
	}
}
