//go:build !linux

package command_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// liveInGroup lists the live (not zombie) processes of process group pgid, from ps(1): there is
// no /proc off Linux (macOS).
func liveInGroup(t *testing.T, pgid int) []int {
	t.Helper()
	out, err := exec.Command("ps", "-A", "-o", "pid=,pgid=,stat=").Output()
	if err != nil {
		t.Fatalf("ps (these tests need it): %v", err)
	}
	var live []int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[2], "Z") {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		g, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && g == pgid {
			live = append(live, pid)
		}
	}
	return live
}
