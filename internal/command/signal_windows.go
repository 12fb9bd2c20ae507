package command

import (
	"fmt"
	"strconv"
	"syscall"
)

// parseSignal: Windows has no signals to send a command (and runs none: process_windows.go).
func parseSignal(s string) (syscall.Signal, error) {
	return 0, fmt.Errorf("signal %q: Windows has no signals to send a command", s)
}

// sigName names sig as the run log shows it.
func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return "signal " + strconv.Itoa(int(sig))
}
