package browser

import "os"

// killProcess ends pid (TerminateProcess: Windows has no signals).
func killProcess(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
