//go:build !windows

package bench

import (
	"syscall"
	"time"
)

// selfCPU returns the user+system CPU this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childrenCPU returns the user+system CPU of this process's children that have exited and been
// waited for (and of their own waited-for descendants): the Chromium processes of a browser pool
// once it is closed.
func childrenCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
