package envconfig_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"crawlq/internal/ecsrun"
	"crawlq/internal/envconfig"
)

func TestECSLauncher(t *testing.T) {
	env := map[string]string{
		"CRAWLQ_ECS_CLUSTER": "c", "CRAWLQ_ECS_TASK_DEFINITION": "td:3", "CRAWLQ_ECS_SUBNETS": "subnet-1, subnet-2",
		"CRAWLQ_ECS_SECURITY_GROUPS": "sg-1", "CRAWLQ_ECS_MAX_TASKS": "7", "CRAWLQ_ECS_CONTAINER": "app",
		"CRAWLQ_ECS_ASSIGN_PUBLIC_IP": "true",
	}
	client := ecs.New(ecs.Options{Region: "us-east-1"})
	l, err := envconfig.ECSLauncher(envconfig.Map(env), client)
	if err != nil {
		t.Fatal(err)
	}
	if l.Cluster != "c" || l.TaskDefinition != "td:3" || fmt.Sprint(l.Subnets) != "[subnet-1 subnet-2]" || l.Max != 7 ||
		l.Container != "app" || !l.AssignPublicIP || fmt.Sprint(l.SecurityGroups) != "[sg-1]" {
		t.Errorf("ECSLauncher = %+v", l)
	}
	in, err := l.Input("FARGATE", 2)
	if err != nil || in.NetworkConfiguration.AwsvpcConfiguration.AssignPublicIp != types.AssignPublicIpEnabled {
		t.Errorf("Input: %+v, %v", in, err)
	}
	if _, err := l.Input("FARGATE", 11); !errors.Is(err, ecsrun.ErrConfig) {
		t.Errorf("Input count 11: %v, want ErrConfig", err)
	}
	for k, want := range map[string]string{
		"CRAWLQ_ECS_CLUSTER": "Cluster", "CRAWLQ_ECS_SUBNETS": "Subnets", "CRAWLQ_ECS_TASK_DEFINITION": "TaskDefinition",
	} {
		bad := map[string]string{}
		for k2, v := range env {
			bad[k2] = v
		}
		delete(bad, k)
		if _, err := envconfig.ECSLauncher(envconfig.Map(bad), client); !errors.Is(err, ecsrun.ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("without %s: %v, want ErrConfig naming %s", k, err, want)
		}
	}
	env["CRAWLQ_ECS_MAX_TASKS"] = "many"
	if _, err := envconfig.ECSLauncher(envconfig.Map(env), client); !errors.Is(err, ecsrun.ErrConfig) || !strings.Contains(err.Error(), "CRAWLQ_ECS_MAX_TASKS") {
		t.Errorf("bad max: %v", err)
	}
}
