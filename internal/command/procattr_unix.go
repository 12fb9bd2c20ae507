//go:build !linux && !windows

package command

import "syscall"

// procAttr puts the command in its own process group. Only Linux can tie the child's life to the
// runner's (Pdeathsig); elsewhere (a developer's macOS) a runner killed with SIGKILL leaves the
// command running until it ends by itself. The runner ships for Linux only.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
