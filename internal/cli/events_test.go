package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"crawlq/internal/awstest"
	"crawlq/internal/cli"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/testwait"
)

// `crawlq worker --maintain-every 1h` publishes the events of a run it works to EventBridge (moto's
// default bus, read back from an SQS target) as the run starts and finishes: no maintenance round
// comes during the test, so only the worker's own pokes can publish them.
func TestWorkerPublishesRunEventsAtOnce(t *testing.T) {
	awstest.Moto(t)
	// The stack's runners get the namespace its monitor alarms watch.
	t.Setenv("CRAWLQ_METRICS_NAMESPACE", "crawlq-custom")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := awstest.Config(t)
	sq, eb := sqs.NewFromConfig(cfg), eventbridge.NewFromConfig(cfg)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("runs")})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("runs"), EventPattern: aws.String(`{"source":["crawlq"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("runs"),
		Targets: []ebtypes.Target{{Id: aws.String("1"), Arn: aws.String(attrs.Attributes["QueueArn"])}}}); err != nil {
		t.Fatal(err)
	}

	_, url := dbtest.Schema(t)
	addr, err := demosite.New(demosite.Config{Items: 10, SlowDelay: time.Millisecond}).Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"worker", "--maintain-every", "1h", "--allow-loopback"}, cli.Env{Stdout: &syncWriter{w: &stdout}, Stderr: &syncWriter{w: &stderr},
			Getenv: func(k string) string {
				if k == "DATABASE_URL" {
					return url
				}
				return os.Getenv(k) // AWS_ENDPOINT_URL: moto, whose default bus the worker picks
			}})
	}()
	code, out, errs := run(t, url, "schedule", "--spider", "demo", "--arg", "base_url=http://"+addr.String())
	if code != 0 {
		t.Fatalf("schedule: %d %s", code, errs)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	var states []string
	testwait.For(t, fmt.Sprintf("run %d's events pending,running,succeeded", id), func() (string, bool) {
		m, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range m.Messages {
			var ev struct {
				Detail struct {
					RunID int64  `json:"run_id"`
					State string `json:"state"`
				} `json:"detail"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(msg.Body)), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Detail.RunID == id {
				states = append(states, ev.Detail.State)
			}
			if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: msg.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		got := strings.Join(states, ",")
		return got + "; worker stderr:\n" + stderr.String(), got == "pending,running,succeeded"
	})
	cancel()
	if c := <-done; c != 0 {
		t.Fatalf("worker exited %d: %s", c, stderr.String())
	}
	// The run's monitors were judged: their metrics are in CRAWLQ_METRICS_NAMESPACE.
	if o := stdout.String(); !strings.Contains(o, `"Namespace":"crawlq-custom"`) || strings.Contains(o, `"Namespace":"crawlq"`) {
		t.Errorf("monitor metrics not (only) in namespace crawlq-custom; stdout:\n%s", o)
	}
}
