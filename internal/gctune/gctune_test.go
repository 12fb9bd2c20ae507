package gctune

import (
	"errors"
	"testing"
)

func TestDecide(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if v, ok := m[p]; ok {
				return []byte(v), nil
			}
			return nil, errors.New("no such file")
		}
	}
	env := func(m map[string]string) Env {
		return Env{GOGC: m["GOGC"], GOMEMLIMIT: m["GOMEMLIMIT"], LambdaMemoryMiB: m["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]}
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  Settings
	}{
		{"nothing known", nil, nil, Settings{Percent: Percent}},
		{"lambda", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"}, nil, Settings{Percent: Percent, Limit: 858993459}},
		{"cgroup v2", nil, map[string]string{"/sys/fs/cgroup/memory.max": "2147483648\n"}, Settings{Percent: Percent, Limit: 1717986918}},
		{"cgroup v2 unlimited", nil, map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, Settings{Percent: Percent}},
		{"cgroup v1", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824"}, Settings{Percent: Percent, Limit: 858993459}},
		{"cgroup v1 unlimited", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, Settings{Percent: Percent}},
		{"user's GOGC and GOMEMLIMIT win", map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, nil, Settings{}},
		{"bad lambda size falls back to cgroup", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "x"}, map[string]string{"/sys/fs/cgroup/memory.max": "1048576"}, Settings{Percent: Percent, Limit: 838860}},
	} {
		if got := Decide(env(tc.env), files(tc.files)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
