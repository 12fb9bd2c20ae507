package events_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"crawlq/internal/awstest"
	"crawlq/internal/awsx"
	"crawlq/internal/dbtest"
	"crawlq/internal/events"
)

// BenchmarkDrain publishes b.N runs' events (3 each, the final one judged), 10 per PutEvents
// call: to moto's EventBridge ("moto"), and with publishing off ("off": the outbox and judging
// alone). Run with -benchtime 1000x.
func BenchmarkDrain(b *testing.B) {
	awstest.Moto(b)
	for _, mode := range []string{"moto", "off"} {
		b.Run(mode, func(b *testing.B) {
			pool := dbtest.Pool(b)
			ctx := context.Background()
			for _, q := range []string{
				`INSERT INTO crawlq_run (spider, queue) SELECT 'shop', 'crawl' FROM generate_series(1, $1::int)`,
				`UPDATE crawlq_run SET state = 'running', started_at = now() WHERE $1::int > 0`,
				`UPDATE crawlq_run SET state = 'succeeded', finished_at = now(), items = 1, pages = 1 WHERE $1::int > 0`,
			} {
				if _, err := pool.Exec(ctx, q, b.N); err != nil {
					b.Fatal(err)
				}
			}
			cfg := events.Config{Pool: pool, MaxCalls: 1 << 30}
			if mode == "moto" {
				ac, err := awsx.Load(ctx)
				if err != nil {
					b.Fatal(err)
				}
				cfg.Putter = eventbridge.NewFromConfig(ac)
			}
			p, err := events.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			res, err := p.Drain(ctx)
			if err != nil || res.Published != 3*b.N {
				b.Fatalf("drain %+v %v", res, err)
			}
			b.ReportMetric(float64(res.Published)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
