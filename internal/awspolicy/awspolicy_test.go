package awspolicy_test

import (
	"errors"
	"testing"

	"crawlq/internal/awspolicy"
)

const topic = "arn:aws:sns:us-east-1:123456789012:crawlq-alarms"

func mustParse(t *testing.T, doc string) awspolicy.Policy {
	t.Helper()
	p, err := awspolicy.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEvaluateResourcePolicy(t *testing.T) {
	p := mustParse(t, `{"Version":"2012-10-17","Statement":[
	 {"Sid":"Owner","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":["SNS:Publish","SNS:Subscribe"],"Resource":"`+topic+`"},
	 {"Sid":"Alarms","Effect":"Allow","Principal":{"Service":"cloudwatch.amazonaws.com"},"Action":"sns:Publish","Resource":"`+topic+`",
	  "Condition":{"StringEquals":{"aws:SourceAccount":"123456789012"},"ArnLike":{"aws:SourceArn":"arn:aws:cloudwatch:us-east-1:123456789012:alarm:crawlq-*"}}},
	 {"Effect":"Deny","Principal":"*","Action":"sns:*","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`)
	alarm := map[string]string{"aws:SourceAccount": "123456789012", "aws:SourceArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:crawlq-lag"}
	cw := awspolicy.Principal{Service: "cloudwatch.amazonaws.com"}
	for name, c := range map[string]struct {
		r    awspolicy.Request
		want awspolicy.Decision
	}{
		"alarm publishes":         {awspolicy.Request{Principal: cw, Action: "sns:Publish", Resource: topic, Context: alarm}, awspolicy.Allow},
		"action case-insensitive": {awspolicy.Request{Principal: cw, Action: "SNS:PUBLISH", Resource: topic, Context: alarm}, awspolicy.Allow},
		"other topic":             {awspolicy.Request{Principal: cw, Action: "sns:Publish", Resource: topic + "x", Context: alarm}, awspolicy.ImplicitDeny},
		"other account's alarm": {awspolicy.Request{Principal: cw, Action: "sns:Publish", Resource: topic, Context: map[string]string{
			"aws:SourceAccount": "999999999999", "aws:SourceArn": "arn:aws:cloudwatch:us-east-1:999999999999:alarm:crawlq-lag"}}, awspolicy.ImplicitDeny},
		"no source keys":     {awspolicy.Request{Principal: cw, Action: "sns:Publish", Resource: topic}, awspolicy.ImplicitDeny},
		"other service":      {awspolicy.Request{Principal: awspolicy.Principal{Service: "events.amazonaws.com"}, Action: "sns:Publish", Resource: topic, Context: alarm}, awspolicy.ImplicitDeny},
		"account role":       {awspolicy.Request{Principal: awspolicy.Principal{AWS: "arn:aws:iam::123456789012:role/ops"}, Action: "sns:Subscribe", Resource: topic}, awspolicy.Allow},
		"other account role": {awspolicy.Request{Principal: awspolicy.Principal{AWS: "arn:aws:iam::999999999999:role/ops"}, Action: "sns:Subscribe", Resource: topic}, awspolicy.ImplicitDeny},
		"deny wins": {awspolicy.Request{Principal: cw, Action: "sns:Publish", Resource: topic, Context: map[string]string{
			"aws:SourceAccount": "123456789012", "aws:SourceArn": alarm["aws:SourceArn"], "aws:SecureTransport": "false"}}, awspolicy.ExplicitDeny},
	} {
		if got := p.Evaluate(c.r); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestEvaluateIdentityPolicy(t *testing.T) {
	p := mustParse(t, `{"Statement":[
	 {"Effect":"Allow","Action":"kms:GenerateDataKey*","Resource":"*"},
	 {"Effect":"Allow","Action":"rds-db:connect","Resource":"arn:aws:rds-db:us-east-1:1:dbuser:prx-?bc/crawlq_app"}]}`)
	type ar struct{ action, resource string }
	for r, want := range map[ar]bool{
		{"kms:GenerateDataKey", "arn:aws:kms:us-east-1:1:key/k"}:                    true,
		{"kms:GenerateDataKeyWithoutPlaintext", "arn:aws:kms:us-east-1:1:key/k"}:    true,
		{"kms:Decrypt", "arn:aws:kms:us-east-1:1:key/k"}:                            false,
		{"rds-db:connect", "arn:aws:rds-db:us-east-1:1:dbuser:prx-abc/crawlq_app"}:  true,
		{"rds-db:connect", "arn:aws:rds-db:us-east-1:1:dbuser:prx-abc/crawlq"}:      false,
		{"rds-db:connect", "arn:aws:rds-db:us-east-1:1:dbuser:prx-abcd/crawlq_app"}: false,
	} {
		if got := p.Allows(awspolicy.Request{Action: r.action, Resource: r.resource}); got != want {
			t.Errorf("%+v: allows %v, want %v", r, got, want)
		}
	}
}

func TestParseRefusesWhatItCannotEvaluate(t *testing.T) {
	for _, doc := range []string{
		`{"Statement":[{"Effect":"Allow","NotAction":"s3:*","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","NotResource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*","Condition":{"NumericLessThan":{"x":"1"}}}]}`,
		`{"Statement":[{"Effect":"Allow","Principal":{"Federated":"x"},"Action":"s3:GetObject","Resource":"*"}]}`,
	} {
		if _, err := awspolicy.Parse(doc); !errors.Is(err, awspolicy.ErrUnsupported) {
			t.Errorf("%s: err %v, want ErrUnsupported", doc, err)
		}
	}
	if _, err := awspolicy.Parse(`{"Statement":[{"Effect":"allow","Action":"a:b","Resource":"*"}]}`); err == nil {
		t.Error("Effect allow (lower case) must be refused")
	}
}
