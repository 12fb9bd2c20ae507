package bench

import (
	"syscall"
	"time"
)

// selfCPU returns the user+system CPU this process has used so far (GetProcessTimes: kernel and
// user times in 100 ns units).
func selfCPU() time.Duration {
	var creation, exit, kernel, user syscall.Filetime
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	if err := syscall.GetProcessTimes(h, &creation, &exit, &kernel, &user); err != nil {
		return 0
	}
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}

// childrenCPU is not measured on Windows: its processes keep no totals of their children.
func childrenCPU() (time.Duration, bool) { return 0, false }
