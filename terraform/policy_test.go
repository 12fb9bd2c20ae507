package terraform_test

import (
	"fmt"
	"strings"
	"testing"

	"crawlq/internal/awspolicy"
	"crawlq/internal/scrapyd"
)

// The checks in this file evaluate policies (internal/awspolicy) instead of matching their
// text: moto enforces no IAM, SNS or KMS policy, so an apply on the emulator proves nothing
// about them. Each takes the rendered documents, so TestPolicyChecks can show it failing on
// the policies of a broken stack without an apply.

// alertSources are what publishes to the alarm topic: each service with the ARNs of the
// stack's sources it publishes for (alarms for CloudWatch, rules for EventBridge).
type alertSources map[string][]string

// alertProblems evaluates the alarm topic's policy and its KMS key's policy for every source
// that publishes an alert: the service may sns:Publish to this topic for this account's
// source, and may use the key (kms:GenerateDataKey, kms:Decrypt) to do so; and no other
// account's source may publish.
func alertProblems(topicDoc, keyDoc, topicARN, keyARN, account string, sources alertSources) []string {
	var out []string
	topic, err := awspolicy.Parse(topicDoc)
	if err != nil {
		return []string{fmt.Sprintf("alarm topic policy: %v", err)}
	}
	key, err := awspolicy.Parse(keyDoc)
	if err != nil {
		return []string{fmt.Sprintf("alarm key policy: %v", err)}
	}
	for _, svc := range []string{"cloudwatch.amazonaws.com", "events.amazonaws.com"} {
		p := awspolicy.Principal{Service: svc}
		if len(sources[svc]) == 0 {
			out = append(out, fmt.Sprintf("%s publishes nothing to the alarm topic (no source found)", svc))
		}
		for _, src := range sources[svc] {
			ctx := map[string]string{"aws:SourceAccount": account, "aws:SourceArn": src}
			if d := topic.Evaluate(awspolicy.Request{Principal: p, Action: "sns:Publish", Resource: topicARN, Context: ctx}); d != awspolicy.Allow {
				out = append(out, fmt.Sprintf("topic policy: %s publishing for %s: %v", svc, src, d))
			}
			// The same source name in another account (a confused deputy) must not publish.
			other := strings.Replace(src, ":"+account+":", ":999999999999:", 1)
			if topic.Allows(awspolicy.Request{Principal: p, Action: "sns:Publish", Resource: topicARN,
				Context: map[string]string{"aws:SourceAccount": "999999999999", "aws:SourceArn": other}}) {
				out = append(out, fmt.Sprintf("topic policy: %s may publish for another account's %s", svc, other))
			}
		}
		for _, action := range []string{"kms:GenerateDataKey", "kms:Decrypt"} {
			ctx := map[string]string{"aws:SourceAccount": account}
			if d := key.Evaluate(awspolicy.Request{Principal: p, Action: action, Resource: keyARN, Context: ctx}); d != awspolicy.Allow {
				out = append(out, fmt.Sprintf("key policy: %s %s: %v", svc, action, d))
			}
		}
	}
	return out
}

// probe is a request for a resource that is none of the stack's own: no role of the stack may
// be allowed it.
type probe struct{ action, resource string }

func probes(region, account string) []probe {
	arn := func(svc, rest string) string { return fmt.Sprintf("arn:aws:%s:%s:%s:%s", svc, region, account, rest) }
	return []probe{
		{"secretsmanager:GetSecretValue", arn("secretsmanager", "secret:someone-elses-AbCdEf")},
		{"rds-db:connect", arn("rds-db", "dbuser:prx-0123456789abcdef0/crawlq_app")},
		{"rds-db:connect", arn("rds-db", "dbuser:prx-0123456789abcdef0/postgres")},
		{"rds-db:connect", arn("rds-db", "dbuser:db-ABCDEFGHIJKLMNOPQRSTUVWXYZ/crawlq_app")},
		{"rds-db:connect", arn("rds-db", "dbuser:db-ABCDEFGHIJKLMNOPQRSTUVWXYZ/postgres")},
		{"s3:GetObject", "arn:aws:s3:::someone-elses-bucket/key"},
		{"s3:PutObject", "arn:aws:s3:::someone-elses-bucket/key"},
		{"lambda:InvokeFunction", arn("lambda", "function:someone-elses")},
		{"logs:PutLogEvents", arn("logs", "log-group:/someone/elses:log-stream:x")},
		{"events:PutEvents", arn("events", "event-bus/someone-elses")},
		{"ecs:RunTask", arn("ecs", "task-definition/someone-elses:1")},
		{"kms:Decrypt", arn("kms", "key/00000000-0000-0000-0000-000000000000")},
		{"iam:PassRole", fmt.Sprintf("arn:aws:iam::%s:role/someone-elses", account)},
		{"scheduler:CreateSchedule", arn("scheduler", "schedule/someone-elses/x")},
	}
}

// iamProblems evaluates an identity policy for requests on resources that are not the
// stack's: a sensitive action allowed on "*" (or on every proxy's users, dbuser:*/*) fails
// here even though its action list looks narrow. Condition keys the stack's policies scope by
// are set to values that pass (the probe tests resources, not conditions).
func iamProblems(name, doc, region, account string) []string {
	pol, err := awspolicy.Parse(doc)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	var out []string
	for _, pr := range probes(region, account) {
		for _, svc := range []string{"ecs-tasks.amazonaws.com", "scheduler.amazonaws.com"} {
			ctx := map[string]string{"iam:PassedToService": svc, "ecs:cluster": fmt.Sprintf("arn:aws:ecs:%s:%s:cluster/crawlq", region, account)}
			if pol.Allows(awspolicy.Request{Action: pr.action, Resource: pr.resource, Context: ctx}) {
				out = append(out, fmt.Sprintf("%s allows %s on %s, a resource not of the stack", name, pr.action, pr.resource))
				break
			}
		}
	}
	return out
}

// The policies of the stack before this check (18cd869), as Terraform rendered them on moto:
// the topic let only the account and EventBridge publish, the key only CloudWatch.
const (
	oldTopicPolicy = `{"Version":"2012-10-17","Statement":[
	 {"Sid":"AccountOwner","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},
	  "Action":["SNS:Subscribe","SNS:SetTopicAttributes","SNS:Publish","SNS:ListSubscriptionsByTopic","SNS:GetTopicAttributes"],
	  "Resource":"arn:aws:sns:us-east-1:123456789012:crawlq-alarms"},
	 {"Sid":"RunEvents","Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"SNS:Publish",
	  "Resource":"arn:aws:sns:us-east-1:123456789012:crawlq-alarms",
	  "Condition":{"ArnEquals":{"aws:SourceArn":"arn:aws:events:us-east-1:123456789012:rule/crawlq-run-failures"}}}]}`
	oldKeyPolicy = `{"Version":"2012-10-17","Statement":[
	 {"Sid":"AccountAdministers","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"kms:*","Resource":"*"},
	 {"Sid":"CloudWatchPublishesAlarms","Effect":"Allow","Principal":{"Service":"cloudwatch.amazonaws.com"},
	  "Action":["kms:GenerateDataKey*","kms:Decrypt"],"Resource":"*"}]}`
)

// TestPolicyChecks shows the policy checks failing on broken policies (the stack's own before
// this check, and the over-broad grants they exist to catch) and passing on narrow ones.
func TestPolicyChecks(t *testing.T) {
	const (
		acct  = "123456789012"
		topic = "arn:aws:sns:us-east-1:123456789012:crawlq-alarms"
		key   = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	)
	sources := alertSources{
		"cloudwatch.amazonaws.com": {"arn:aws:cloudwatch:us-east-1:123456789012:alarm:crawlq-dead-jobs"},
		"events.amazonaws.com":     {"arn:aws:events:us-east-1:123456789012:rule/crawlq-run-failures"},
	}
	got := alertProblems(oldTopicPolicy, oldKeyPolicy, topic, key, acct, sources)
	for _, want := range []string{
		"topic policy: cloudwatch.amazonaws.com publishing for arn:aws:cloudwatch:us-east-1:123456789012:alarm:crawlq-dead-jobs: implicit deny",
		"key policy: events.amazonaws.com kms:GenerateDataKey: implicit deny",
		"key policy: events.amazonaws.com kms:Decrypt: implicit deny",
	} {
		if !contains(got, want) {
			t.Errorf("old stack's policies: problems %q lack %q", got, want)
		}
	}

	good := `{"Statement":[
	 {"Effect":"Allow","Principal":{"Service":"cloudwatch.amazonaws.com"},"Action":"SNS:Publish","Resource":"` + topic + `",
	  "Condition":{"StringEquals":{"aws:SourceAccount":"` + acct + `"},"ArnLike":{"aws:SourceArn":"arn:aws:cloudwatch:us-east-1:` + acct + `:alarm:crawlq-*"}}},
	 {"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"SNS:Publish","Resource":"` + topic + `",
	  "Condition":{"StringEquals":{"aws:SourceAccount":"` + acct + `"},"ArnEquals":{"aws:SourceArn":"arn:aws:events:us-east-1:` + acct + `:rule/crawlq-run-failures"}}}]}`
	goodKey := `{"Statement":[{"Effect":"Allow","Principal":{"Service":["cloudwatch.amazonaws.com","events.amazonaws.com"]},
	  "Action":["kms:Decrypt","kms:GenerateDataKey*"],"Resource":"*"}]}`
	if got := alertProblems(good, goodKey, topic, key, acct, sources); len(got) != 0 {
		t.Errorf("narrow policies: %q", got)
	}
	// Without the account condition, another account's alarm of the same name may publish.
	open := strings.ReplaceAll(good, `"StringEquals":{"aws:SourceAccount":"`+acct+`"},`, "")
	open = strings.ReplaceAll(open, acct+`:alarm`, `*:alarm`)
	if got := alertProblems(open, goodKey, topic, key, acct, sources); !strings.Contains(strings.Join(got, "\n"), "another account") {
		t.Errorf("a topic open to every account's alarms passed: %q", got)
	}

	for doc, want := range map[string]string{
		`{"Statement":[{"Effect":"Allow","Action":"secretsmanager:GetSecretValue","Resource":"*"}]}`:                                                               "secretsmanager:GetSecretValue",
		`{"Statement":[{"Effect":"Allow","Action":"rds-db:connect","Resource":"arn:aws:rds-db:us-east-1:123456789012:dbuser:*/*"}]}`:                               "rds-db:connect",
		`{"Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::*/*"}]}`:                                                "s3:GetObject",
		`{"Statement":[{"Effect":"Allow","Action":"iam:PassRole","Resource":"*","Condition":{"StringEquals":{"iam:PassedToService":"ecs-tasks.amazonaws.com"}}}]}`: "iam:PassRole",
	} {
		if got := iamProblems("p", doc, "us-east-1", acct); !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("%s: problems %q, want one about %s", doc, got, want)
		}
	}
	narrow := `{"Statement":[
	 {"Effect":"Allow","Action":"secretsmanager:GetSecretValue","Resource":"arn:aws:secretsmanager:us-east-1:123456789012:secret:crawlq-db-crawlq_app-x1Y2z3"},
	 {"Effect":"Allow","Action":"rds-db:connect","Resource":"arn:aws:rds-db:us-east-1:123456789012:dbuser:prx-0a1b2c3d4e5f60718/crawlq_app"},
	 {"Effect":"Allow","Action":["ec2:CreateNetworkInterface","ec2:DescribeNetworkInterfaces"],"Resource":"*"}]}`
	if got := iamProblems("p", narrow, "us-east-1", acct); len(got) != 0 {
		t.Errorf("narrow policy: %q", got)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// apiBucketProblems evaluates the api role's policy for what its Scrapyd API does with the
// items bucket: read a run's item objects and list them (items.S3Reader), put and read a large
// answer under scrapyd.SpillPrefix (scrapyd.S3Spill); and for what it must not: write or
// delete an item.
func apiBucketProblems(doc, bucketARN string) []string {
	pol, err := awspolicy.Parse(doc)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, r := range []struct {
		action, resource string
		allow            bool
	}{
		{"s3:GetObject", bucketARN + "/items/runs/7/1-ab.jsonl.gz", true},
		{"s3:ListBucket", bucketARN, true},
		{"s3:PutObject", bucketARN + "/" + scrapyd.SpillPrefix + "20261124T000000Z-ab", true},
		{"s3:GetObject", bucketARN + "/" + scrapyd.SpillPrefix + "20261124T000000Z-ab", true},
		{"s3:PutObject", bucketARN + "/items/runs/7/1-ab.jsonl.gz", false},
		{"s3:DeleteObject", bucketARN + "/items/runs/7/1-ab.jsonl.gz", false},
		{"s3:GetObject", "arn:aws:s3:::someone-elses-bucket/" + scrapyd.SpillPrefix + "x", false},
	} {
		if got := pol.Allows(awspolicy.Request{Action: r.action, Resource: r.resource, Context: map[string]string{}}); got != r.allow {
			out = append(out, fmt.Sprintf("%s on %s: allowed %v, want %v", r.action, r.resource, got, r.allow))
		}
	}
	return out
}

// TestAPIBucketCheck shows apiBucketProblems failing on the api's policy before it read items
// (no bucket grant) and on a broad grant (it could rewrite items), and passing on the narrow one.
func TestAPIBucketCheck(t *testing.T) {
	const bucket = "arn:aws:s3:::crawlq-items-123456789012"
	none := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"rds-db:connect","Resource":"arn:aws:rds-db:us-east-1:123456789012:dbuser:prx-1/crawlq_app"}]}`
	broad := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":["` + bucket + `","` + bucket + `/*"]}]}`
	narrow := `{"Version":"2012-10-17","Statement":[
	 {"Effect":"Allow","Action":"s3:GetObject","Resource":"` + bucket + `/items/*"},
	 {"Effect":"Allow","Action":"s3:ListBucket","Resource":"` + bucket + `"},
	 {"Effect":"Allow","Action":["s3:PutObject","s3:GetObject"],"Resource":"` + bucket + `/scrapyd-answers/*"}]}`
	if got := apiBucketProblems(none, bucket); len(got) != 4 {
		t.Errorf("no grant: %v; want the 4 reads and writes it needs", got)
	}
	if got := apiBucketProblems(broad, bucket); len(got) != 2 {
		t.Errorf("s3:* on the bucket: %v; want the item put and delete", got)
	}
	if got := apiBucketProblems(narrow, bucket); len(got) != 0 {
		t.Errorf("narrow grant: %v", got)
	}
}
