//go:build !linux

package browser

import (
	"fmt"
	"runtime"
)

// rssSupported says whether treeRSS measures anything on this OS.
const rssSupported = false

// treeRSS reads /proc on Linux only; elsewhere the memory limit is not enforced (New logs so)
// and the page limit alone recycles browsers.
func treeRSS(int) (int64, error) {
	return 0, fmt.Errorf("browser memory of a process tree is not measured on %s", runtime.GOOS)
}
