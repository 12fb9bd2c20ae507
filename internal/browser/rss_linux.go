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
// GPU and network service): the sum of each process's proportional set size (Pss in
// /proc/<pid>/smaps_rollup), so a page shared by n processes counts 1/n in each and the sum is
// what the tree holds in RAM. Summed plain RSS counts Chromium's binary and shared memory once
// per process: 850 MiB for a browser with one tab whose PSS is under 300 MiB. Where
// smaps_rollup is missing (kernels before 4.14) it falls back to RSS from statm.
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
		if pss, ok := readPss(p); ok {
			total += pss
		} else if statm, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/statm"); err == nil {
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

// readPss reads the Pss line of /proc/<pid>/smaps_rollup, in bytes.
func readPss(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if rest, ok := bytes.CutPrefix(line, []byte("Pss:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
