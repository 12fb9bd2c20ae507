package ecsrun_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/ecsrun"
	"crawlq/internal/queue"
)

// runTaskCall is the part of a recorded RunTask request the tests check.
type runTaskCall struct {
	Cluster                  string `json:"cluster"`
	TaskDefinition           string `json:"taskDefinition"`
	Count                    int    `json:"count"`
	LaunchType               string `json:"launchType"`
	StartedBy                string `json:"startedBy"`
	ClientToken              string `json:"clientToken"`
	CapacityProviderStrategy []struct {
		CapacityProvider string `json:"capacityProvider"`
		Weight           int    `json:"weight"`
	} `json:"capacityProviderStrategy"`
	NetworkConfiguration struct {
		AwsvpcConfiguration struct {
			Subnets        []string `json:"subnets"`
			SecurityGroups []string `json:"securityGroups"`
			AssignPublicIP string   `json:"assignPublicIp"`
		} `json:"awsvpcConfiguration"`
	} `json:"networkConfiguration"`
	Overrides struct {
		ContainerOverrides []struct {
			Name        string `json:"name"`
			Environment []struct {
				Name, Value string
			} `json:"environment"`
		} `json:"containerOverrides"`
	} `json:"overrides"`
}

// moto is a moto_server with request recording, a cluster, a Fargate x86_64 task definition,
// and container instances: moto ignores capacity provider strategies and places such tasks as
// if on EC2, so it needs instances to place them on (real Fargate needs none).
type moto struct {
	endpoint string
	recFile  string
	client   *ecs.Client
	subnets  []string
	sg       string
}

func startMoto(t *testing.T) *moto {
	t.Helper()
	m := &moto{recFile: filepath.Join(t.TempDir(), "recording.jsonl")}
	t.Setenv("MOTO_RECORDER_FILEPATH", m.recFile)
	m.endpoint = awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	m.client = ecs.NewFromConfig(cfg, func(o *ecs.Options) { o.HTTPClient = &http.Client{Transport: motoFix{http.DefaultTransport}} })
	// The default VPC's subnets and security group, through EC2's query API (no EC2 SDK here).
	m.subnets = ec2IDs(t, m.endpoint, "DescribeSubnets", "subnetId")[:2]
	m.sg = ec2IDs(t, m.endpoint, "DescribeSecurityGroups", "groupId")[0]
	if _, err := m.client.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("crawlq")}); err != nil {
		t.Fatal(err)
	}
	register := func(family string, arch types.CPUArchitecture) {
		_, err := m.client.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
			Family: aws.String(family), NetworkMode: types.NetworkModeAwsvpc, Cpu: aws.String("256"), Memory: aws.String("512"),
			RequiresCompatibilities: []types.Compatibility{types.CompatibilityFargate},
			RuntimePlatform:         &types.RuntimePlatform{CpuArchitecture: arch, OperatingSystemFamily: types.OSFamilyLinux},
			ContainerDefinitions: []types.ContainerDefinition{{Name: aws.String("runner"), Image: aws.String("crawlq-runner:latest"),
				Memory: aws.Int32(512), Essential: aws.Bool(true)}}, // no container cpu: moto would answer it as a number, the SDK wants a string
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	register("crawlq-runner", types.CPUArchitectureX8664)
	register("crawlq-runner-arm", types.CPUArchitectureArm64)
	instances := ec2IDs(t, m.endpoint, "RunInstances", "instanceId", "ImageId", "ami-12c6146b", "MinCount", "3", "MaxCount", "3",
		"InstanceType", "t3.micro")
	for _, id := range instances {
		doc := fmt.Sprintf(`{"instanceId":%q}`, id)
		if _, err := m.client.RegisterContainerInstance(ctx, &ecs.RegisterContainerInstanceInput{
			Cluster: aws.String("crawlq"), InstanceIdentityDocument: aws.String(doc)}); err != nil {
			t.Fatal(err)
		}
	}
	m.post(t, "/moto-api/recorder/start-recording")
	return m
}

// motoFix works around a moto bug: its RunTask and DescribeTasks answers give a container's cpu
// and memory as JSON numbers where the ECS API (and so the SDK) has strings.
type motoFix struct{ next http.RoundTripper }

func (f motoFix) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(req)
	target := req.Header.Get("X-Amz-Target")
	if err != nil || resp.StatusCode != 200 || !(strings.HasSuffix(target, ".RunTask") || strings.HasSuffix(target, ".DescribeTasks")) {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(body, &v); err == nil {
		stringify(v)
		body, _ = json.Marshal(v)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

func stringify(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := e.(float64); ok && (k == "cpu" || k == "memory") {
				x[k] = strconv.FormatFloat(n, 'f', -1, 64)
			} else {
				stringify(e)
			}
		}
	case []any:
		for _, e := range x {
			stringify(e)
		}
	}
}

func (m *moto) post(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Post(m.endpoint+path, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", path, resp.Status)
	}
}

func ec2IDs(t *testing.T, endpoint, action, tag string, params ...string) []string {
	t.Helper()
	form := url.Values{"Action": {action}, "Version": {"2016-11-15"}}
	for i := 0; i+1 < len(params); i += 2 {
		form.Set(params[i], params[i+1])
	}
	req, err := http.NewRequest("POST", endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// moto routes by the service named in the credential scope; it does not check the signature.
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ids []string
	for _, m := range regexp.MustCompile("<"+tag+">([^<]+)</"+tag+">").FindAllStringSubmatch(string(b), -1) {
		ids = append(ids, m[1])
	}
	if len(ids) < 1 {
		t.Fatalf("%s found nothing in moto's default VPC: %s", action, b)
	}
	return ids
}

// calls returns the RunTask requests moto received since the last reset.
func (m *moto) calls(t *testing.T) []runTaskCall {
	t.Helper()
	f, err := os.Open(m.recFile)
	if err != nil {
		t.Fatalf("moto recording: %v", err)
	}
	defer f.Close()
	var out []runTaskCall
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Headers     map[string]string `json:"headers"`
			Body        string            `json:"body"`
			BodyEncoded bool              `json:"body_encoded"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		target := e.Headers["X-Amz-Target"]
		if !strings.HasSuffix(target, ".RunTask") {
			continue
		}
		body := []byte(e.Body)
		if e.BodyEncoded {
			if body, err = base64.StdEncoding.DecodeString(e.Body); err != nil {
				t.Fatal(err)
			}
		}
		var c runTaskCall
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatalf("RunTask body %s: %v", body, err)
		}
		out = append(out, c)
	}
	return out
}

func (m *moto) reset(t *testing.T) { m.post(t, "/moto-api/recorder/reset-recording") }

func (m *moto) taskCount(t *testing.T) int {
	t.Helper()
	n := 0
	p := ecs.NewListTasksPaginator(m.client, &ecs.ListTasksInput{Cluster: aws.String("crawlq")})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += len(out.TaskArns)
	}
	return n
}

func TestLaunchAgainstMoto(t *testing.T) {
	m := startMoto(t)
	ctx := context.Background()
	l := &ecsrun.Launcher{Client: m.client, Cluster: "crawlq", TaskDefinition: "crawlq-runner", Subnets: m.subnets,
		SecurityGroups: []string{m.sg}, Max: 25, Concurrency: 4, MaxJobs: 50, MaxMemoryMiB: 900}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("check x86_64 task definition: %v", err)
	}
	arm := *l
	arm.TaskDefinition = "crawlq-runner-arm"
	if err := arm.Check(ctx); !errors.Is(err, ecsrun.ErrTaskDefinition) || !strings.Contains(err.Error(), "X86_64") {
		t.Errorf("check arm64 task definition: %v, want ErrTaskDefinition naming X86_64", err)
	}
	m.reset(t)

	// 40 asked, Max 25: 25 started, in calls of 10, 10 and 5.
	started, err := l.Launch(ctx, 40)
	if err != nil || started != 25 {
		t.Fatalf("Launch(40) = %d, %v; want 25 (the maximum)", started, err)
	}
	calls := m.calls(t)
	var counts []int
	tokens := map[string]bool{}
	for _, c := range calls {
		counts = append(counts, c.Count)
		tokens[c.ClientToken] = true
		if c.Cluster != "crawlq" || c.TaskDefinition != "crawlq-runner" || c.LaunchType != "" || c.StartedBy != "crawlq-dispatch" {
			t.Errorf("call %+v: wrong cluster, task definition, launch type or startedBy", c)
		}
		if len(c.CapacityProviderStrategy) != 1 || c.CapacityProviderStrategy[0].CapacityProvider != "FARGATE_SPOT" || c.CapacityProviderStrategy[0].Weight != 1 {
			t.Errorf("capacity provider strategy %+v, want FARGATE_SPOT weight 1", c.CapacityProviderStrategy)
		}
		vpc := c.NetworkConfiguration.AwsvpcConfiguration
		if strings.Join(vpc.Subnets, ",") != strings.Join(m.subnets, ",") || len(vpc.SecurityGroups) != 1 || vpc.SecurityGroups[0] != m.sg || vpc.AssignPublicIP != "DISABLED" {
			t.Errorf("network configuration %+v, want subnets %v, group %s, no public IP", vpc, m.subnets, m.sg)
		}
		co := c.Overrides.ContainerOverrides
		if len(co) != 1 || co[0].Name != "runner" {
			t.Fatalf("container overrides %+v", co)
		}
		env := map[string]string{}
		for _, kv := range co[0].Environment {
			env[kv.Name] = kv.Value
		}
		want := map[string]string{"CRAWLQ_QUEUE": "long", "CRAWLQ_CONCURRENCY": "4", "CRAWLQ_MAX_JOBS": "50", "CRAWLQ_MAX_MEMORY_MIB": "900"}
		if fmt.Sprint(env) != fmt.Sprint(want) {
			t.Errorf("override environment %v, want %v", env, want)
		}
	}
	if fmt.Sprint(counts) != "[10 10 5]" {
		t.Errorf("RunTask counts %v, want [10 10 5]", counts)
	}
	if len(tokens) != len(calls) {
		t.Errorf("client tokens repeat across calls: %v", tokens)
	}
	if n := m.taskCount(t); n != 25 {
		t.Errorf("moto has %d tasks, want 25", n)
	}

	m.reset(t)
	if started, err := l.Launch(ctx, 3); err != nil || started != 3 {
		t.Fatalf("Launch(3) = %d, %v", started, err)
	}
	if calls := m.calls(t); len(calls) != 1 || calls[0].Count != 3 {
		t.Errorf("Launch(3) made calls %+v, want one of 3", calls)
	}
	m.reset(t)
	if started, err := l.Launch(ctx, 0); err != nil || started != 0 || len(m.calls(t)) != 0 {
		t.Errorf("Launch(0) = %d, %v, and made %d calls; want nothing", started, err, len(m.calls(t)))
	}

	// A task definition ECS does not know: the API error, nothing started.
	bad := *l
	bad.TaskDefinition = "missing"
	if started, err := bad.Launch(ctx, 2); err == nil || started != 0 {
		t.Errorf("Launch with a missing task definition = %d, %v; want an error", started, err)
	}
}

// TestTickFromPostgres: the live runners and the queue's counts come from Postgres.
func TestTickFromPostgres(t *testing.T) {
	m := startMoto(t)
	ctx := context.Background()
	qc := queue.New(dbtest.Pool(t), queue.Config{})
	ps := make([]queue.EnqueueParams, 30)
	for i := range ps {
		ps[i] = queue.EnqueueParams{Queue: "long", Kind: "sleep"}
	}
	if _, err := qc.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	l := &ecsrun.Launcher{Client: m.client, Cluster: "crawlq", TaskDefinition: "crawlq-runner", Subnets: m.subnets,
		SecurityGroups: []string{m.sg}, Max: 4} // moto needs a security group; ECS would use the default one
	// 30 waiting jobs at 6 per runner want 5 runners; the maximum is 4, one is starting.
	m.reset(t)
	started, err := l.Tick(ctx, qc, 0, 1)
	if err != nil || started != 3 {
		t.Fatalf("Tick = %d, %v; want 3", started, err)
	}
	if calls := m.calls(t); len(calls) != 1 || calls[0].Count != 3 {
		t.Errorf("calls %+v, want one RunTask of 3", calls)
	}
}

func TestNeeded(t *testing.T) {
	l := &ecsrun.Launcher{Max: 5, Concurrency: 4}
	for _, c := range []struct {
		st             queue.QueueStats
		live, starting int
		want           int
	}{
		{queue.QueueStats{}, 0, 0, 0},
		{queue.QueueStats{Available: 1}, 0, 0, 1},
		{queue.QueueStats{Available: 9}, 0, 0, 3},
		{queue.QueueStats{Available: 9, Running: 4}, 1, 0, 3},
		{queue.QueueStats{Available: 100}, 0, 0, 5},
		{queue.QueueStats{Available: 100}, 4, 0, 1},
		{queue.QueueStats{Available: 100}, 4, 3, 0},
		{queue.QueueStats{Available: 100}, 9, 0, 0},
		{queue.QueueStats{Scheduled: 100}, 0, 0, 0},
	} {
		if got := l.Needed(c.st, c.live, c.starting); got != c.want {
			t.Errorf("Needed(%+v, live %d, starting %d) = %d, want %d", c.st, c.live, c.starting, got, c.want)
		}
	}
}
