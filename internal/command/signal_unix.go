//go:build !windows

package command

import (
	"fmt"
	"strconv"
	"syscall"
)

// signals are the signals a cancel may name (spiderstore.ParseCancelSignal's names).
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM, "STOP": syscall.SIGSTOP,
}

// parseSignal turns a cancel's signal (a name of signals, or a number) into this system's.
func parseSignal(s string) (syscall.Signal, error) {
	if sig, ok := signals[s]; ok {
		return sig, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n <= 64 {
		return syscall.Signal(n), nil
	}
	return 0, fmt.Errorf("signal %q: want a name such as INT or TERM, or a number 1-64", s)
}

// sigName names sig as the run log shows it: SIGINT, or "signal 34".
func sigName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return "SIG" + name
		}
	}
	return "signal " + strconv.Itoa(int(sig))
}
