package lambdafn_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"crawlq/internal/awstest"
	"crawlq/internal/awsx"
	"crawlq/internal/dbtest"
	"crawlq/internal/lambdafn"
)

// The dispatch config publishes run events to CRAWLQ_EVENT_BUS (here a custom bus in moto), and
// judges runs without publishing when it is "off".
func TestDispatchPublishesToEventBus(t *testing.T) {
	awstest.Moto(t)
	ctx := context.Background()
	cfg, err := awsx.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eb, sq := eventbridge.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String("crawlq-runs")}); err != nil {
		t.Fatal(err)
	}
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("runs")})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("runs"), EventBusName: aws.String("crawlq-runs"),
		EventPattern: aws.String(`{"source":["crawlq"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("runs"), EventBusName: aws.String("crawlq-runs"),
		Targets: []ebtypes.Target{{Id: aws.String("1"), Arn: aws.String(attrs.Attributes["QueueArn"])}}}); err != nil {
		t.Fatal(err)
	}

	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_run (spider, queue) VALUES ('demo', 'crawl')`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CRAWLQ_EVENT_BUS": "crawlq-runs"}
	d, err := lambdafn.NewDeps(pool, cfg, nil, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var emf bytes.Buffer
	p, err := d.Events(&emf)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Drain(ctx); err != nil || res.Published != 1 {
		t.Fatalf("drain %+v %v", res, err)
	}
	m, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil || len(m.Messages) != 1 || !strings.Contains(aws.ToString(m.Messages[0].Body), `"state": "pending"`) &&
		!strings.Contains(aws.ToString(m.Messages[0].Body), `"state":"pending"`) {
		t.Fatalf("messages %+v %v", m, err)
	}

	env["CRAWLQ_EVENT_BUS"] = "off"
	if _, err := pool.Exec(ctx, `UPDATE crawlq_run SET state = 'cancelled'`); err != nil {
		t.Fatal(err)
	}
	if p, err = d.Events(&emf); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Drain(ctx); err != nil || res.Published != 1 || res.Judged != 1 {
		t.Fatalf("drain with events off %+v %v", res, err)
	}
	m, err = sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil || len(m.Messages) != 0 {
		t.Fatalf("published with events off: %+v %v", m.Messages, err)
	}
}
