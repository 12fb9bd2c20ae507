//go:build linux

package browser

import (
	"bytes"
	"os"
	"strconv"
)

// rssSupported says whether treeRSS measures anything on this OS.
const rssSupported = true

// treeRSS is the resident memory of pid and all its descendants (Chromium's zygote, renderers,
// GPU and network service), summed from /proc/<pid>/statm. Pages shared between the processes
// are counted in each, so it overstates what the tree costs: a limit on it errs on the safe side.
func treeRSS(pid int) (int64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// The command name in parentheses may hold spaces: read after its closing one.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(fields[1]))
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], child)
	}
	page := int64(os.Getpagesize())
	var total int64
	seen := map[int]bool{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		statm, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/statm")
		if err == nil {
			if f := bytes.Fields(statm); len(f) >= 2 {
				if n, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
					total += n * page
				}
			}
		}
		queue = append(queue, children[p]...)
	}
	return total, nil
}
