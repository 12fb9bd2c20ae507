package command

import "syscall"

// procAttr puts the command in its own process group, and has Linux kill it if the runner dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
