package lambdafn

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"crawlq/internal/api"
	"crawlq/internal/dispatch"
)

// APIConfig returns the api configuration: schedules through EventBridge Scheduler when
// Config.API.APIFunctionARN and Config.API.SchedulerRoleARN are set,
// and a poke of the dispatch function after each schedule through invoker (nil: no poke).
func (d *Deps) APIConfig(invoker dispatch.Invoker) api.Config {
	c := api.Config{Crawler: d.Control.Crawler, Queue: d.Control.Queue, Spiders: d.Spiders, Logger: d.Logger,
		ScheduleGroup: d.Config.API.ScheduleGroup, TargetARN: d.Config.API.APIFunctionARN, RoleARN: d.Config.API.SchedulerRoleARN, Clock: d.Clock}
	if c.TargetARN != "" && c.RoleARN != "" {
		c.Scheduler = scheduler.NewFromConfig(d.AWS)
	}
	c.OnRunChange = d.PublishRunEvents
	if invoker != nil {
		fn := d.Config.API.DispatchFunction
		c.Poke = func(ctx context.Context, runID int64) error {
			payload, err := json.Marshal(dispatchEvent{Source: dispatch.PokeSource, Runs: []int64{runID}})
			if err != nil {
				return err
			}
			_, err = invoker.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(fn),
				InvocationType: lambdatypes.InvocationTypeEvent, Payload: payload})
			return err
		}
	}
	return c
}

// API returns the api handler: any JSON payload in, a Scrapyd-shaped response out. It never
// returns an error, so callers always get {"status":...}.
func API(a *api.API) func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		return a.HandleJSON(ctx, payload), nil
	}
}
