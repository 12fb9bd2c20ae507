package command

import (
	"fmt"
	"syscall"
)

// errNoProcessGroups: this system cannot run command spiders.
var errNoProcessGroups = fmt.Errorf("%w: command spiders need Linux or macOS: the runner stops a command by signalling its process group, which Windows lacks (run the runner in Linux, e.g. its container image or WSL)", ErrInvalid)

// processGroupsSupported refuses to start a command: Windows has neither process groups nor
// signals, and a command the runner cannot stop or clean up after must not start.
func processGroupsSupported() error { return errNoProcessGroups }

// procAttr is never used on Windows (no command starts).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// signalGroup never finds a group on Windows (no command starts).
func signalGroup(int, syscall.Signal) bool { return false }
