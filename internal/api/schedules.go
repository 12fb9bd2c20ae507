package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// Scheduler is the part of the EventBridge Scheduler client the api uses; *scheduler.Client
// implements it.
type Scheduler interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
	ListSchedules(ctx context.Context, in *scheduler.ListSchedulesInput, opts ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

var errNoScheduler = userErrf("recurring schedules are not configured here (no EventBridge Scheduler)")

// schedulePayload is the api request a schedule sends: a plain schedule action, so a recurring
// run goes through exactly the validation of a one-off one.
type schedulePayload struct {
	Action    string            `json:"action"`
	Spider    string            `json:"spider"`
	Args      map[string]string `json:"args,omitempty"`
	Settings  any               `json:"settings,omitempty"`
	Priority  *int              `json:"priority,omitempty"`
	UniqueKey string            `json:"unique_key,omitempty"`
	// Version pins every scheduled run to one stored version of the spider, as schedule's does.
	Version string `json:"version,omitempty"`
}

func (a *API) addSchedule(ctx context.Context, r *Request) (Response, error) {
	if a.cfg.Scheduler == nil {
		return nil, errNoScheduler
	}
	if _, err := a.scheduleParams(ctx, r); err != nil {
		return nil, err
	}
	expr, err := a.expression(r.Cron)
	if err != nil {
		return nil, err
	}
	tz, err := loadTimezone(r.Timezone)
	if err != nil {
		return nil, err
	}
	p := schedulePayload{Action: ActSchedule, Spider: r.Spider, Args: r.Args, Priority: r.Priority, UniqueKey: r.UniqueKey,
		Version: r.Version}
	if r.Settings != nil {
		p.Settings = r.Settings
	}
	input, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode schedule payload: %w", err)
	}
	name := r.Name
	if name == "" {
		// Same spider, args and timing give the same name, so retrying addschedule is harmless.
		sum := sha256.Sum256([]byte(expr + "\x00" + tz + "\x00" + string(input)))
		name = scheduleSafe(r.Spider) + "-" + hex.EncodeToString(sum[:6])
	}
	target := &types.Target{Arn: aws.String(a.cfg.TargetARN), RoleArn: aws.String(a.cfg.RoleARN), Input: aws.String(string(input)),
		// A run missed for longer than an hour is better skipped than started late.
		RetryPolicy: &types.RetryPolicy{MaximumEventAgeInSeconds: aws.Int32(3600), MaximumRetryAttempts: aws.Int32(3)}}
	desc := aws.String("crawlq: run spider " + r.Spider)
	ftw := &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}
	_, err = a.cfg.Scheduler.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(name), GroupName: aws.String(a.cfg.ScheduleGroup), ScheduleExpression: aws.String(expr),
		ScheduleExpressionTimezone: aws.String(tz), FlexibleTimeWindow: ftw, Target: target, Description: desc,
		State: types.ScheduleStateEnabled,
	})
	var conflict *types.ConflictException
	if errors.As(err, &conflict) {
		if !r.Replace {
			return nil, userErrf("schedule %q already exists: delete it first or pass \"replace\": true", name)
		}
		_, err = a.cfg.Scheduler.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
			Name: aws.String(name), GroupName: aws.String(a.cfg.ScheduleGroup), ScheduleExpression: aws.String(expr),
			ScheduleExpressionTimezone: aws.String(tz), FlexibleTimeWindow: ftw, Target: target, Description: desc,
			State: types.ScheduleStateEnabled,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	return Response{"name": name, "expression": expr, "timezone": tz}, nil
}

// expression checks a schedule's expression as ScheduleExpression does, or, when the Scheduler
// checks its own (crawlq local's store, which also fires rate(N seconds) and cannot fire every
// EventBridge cron), as the Scheduler does.
func (a *API) expression(s string) (string, error) {
	c, ok := a.cfg.Scheduler.(interface {
		Expression(expr string, check func(string) (string, error)) (string, error)
	})
	if !ok {
		return ScheduleExpression(s)
	}
	expr, err := c.Expression(s, ScheduleExpression)
	if err != nil && !errors.Is(err, ErrBadRequest) {
		return "", badf("cron %q: %v", clip(s), err)
	}
	return expr, err
}

// scheduleSafe keeps the characters a schedule name allows, leaving room for the suffix.
func scheduleSafe(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteRune(c)
		}
		if b.Len() >= 48 {
			break
		}
	}
	if b.Len() == 0 {
		return "spider"
	}
	return b.String()
}

// ScheduleView is one recurring run as listschedules shows it.
type ScheduleView struct {
	Name       string          `json:"name"`
	Expression string          `json:"expression"`
	Timezone   string          `json:"timezone"`
	State      string          `json:"state"`
	Spider     string          `json:"spider,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

func (a *API) listSchedules(ctx context.Context) (Response, error) {
	if a.cfg.Scheduler == nil {
		return nil, errNoScheduler
	}
	views := []ScheduleView{}
	var token *string
	for {
		out, err := a.cfg.Scheduler.ListSchedules(ctx, &scheduler.ListSchedulesInput{GroupName: aws.String(a.cfg.ScheduleGroup), NextToken: token})
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		for _, s := range out.Schedules {
			g, err := a.cfg.Scheduler.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: s.Name, GroupName: aws.String(a.cfg.ScheduleGroup)})
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				continue // deleted between the list and the get
			}
			if err != nil {
				return nil, fmt.Errorf("get schedule %s: %w", aws.ToString(s.Name), err)
			}
			v := ScheduleView{Name: aws.ToString(g.Name), Expression: aws.ToString(g.ScheduleExpression),
				Timezone: aws.ToString(g.ScheduleExpressionTimezone), State: string(g.State)}
			if g.Target != nil && g.Target.Input != nil {
				in := []byte(aws.ToString(g.Target.Input))
				var p schedulePayload
				if json.Unmarshal(in, &p) == nil {
					v.Spider = p.Spider
				}
				if json.Valid(in) {
					v.Payload = in
				}
			}
			views = append(views, v)
		}
		if out.NextToken == nil || *out.NextToken == "" {
			break
		}
		token = out.NextToken
	}
	return Response{"schedules": views}, nil
}

func (a *API) delSchedule(ctx context.Context, r *Request) (Response, error) {
	if a.cfg.Scheduler == nil {
		return nil, errNoScheduler
	}
	_, err := a.cfg.Scheduler.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(r.Name), GroupName: aws.String(a.cfg.ScheduleGroup)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, userErrf("unknown schedule %q", r.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("delete schedule: %w", err)
	}
	return Response{"name": r.Name}, nil
}
