//go:build !windows

package command

import "syscall"

// processGroupsSupported: Unix systems run commands in process groups.
func processGroupsSupported() error { return nil }

// signalGroup signals process group pgid and reports whether it had any member.
func signalGroup(pgid int, sig syscall.Signal) bool {
	return syscall.Kill(-pgid, sig) == nil
}
