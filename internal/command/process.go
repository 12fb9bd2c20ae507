package command

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"crawlq/internal/queue"
)

// process is a started command: the leader of its own process group, and the parent's ends of
// its three pipes.
type process struct {
	pid                   int // also the process group's id
	items, stdout, stderr *os.File
	// exited receives cmd.Wait's result once the main process has exited.
	exited chan error
}

// startProcess starts argv in dir with env, in its own process group, with fd 3 the write end
// of the item pipe and stdin /dev/null. Close the process's pipes when done with it.
func startProcess(argv []string, dir string, env []string) (*process, error) {
	if err := processGroupsSupported(); err != nil {
		return nil, queue.Permanent(err)
	}
	var parentEnds, childEnds []*os.File
	pipe := func() (*os.File, *os.File, error) {
		pr, pw, err := os.Pipe()
		if err == nil {
			parentEnds, childEnds = append(parentEnds, pr), append(childEnds, pw)
		}
		return pr, pw, err
	}
	itemsR, itemsW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeFiles(parentEnds)
		closeFiles(childEnds)
		return nil, fmt.Errorf("create pipes: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{itemsW} // fd 3
	// Its own process group, so one signal reaches everything it starts. On Linux, Pdeathsig
	// kills the command if the runner itself is killed with SIGKILL; only the command, not what
	// it started (on ECS those end with the task, whose container the runner's death stops).
	cmd.SysProcAttr = procAttr()
	startErr := cmd.Start()
	closeFiles(childEnds) // the child has its copies; ours would keep the pipes from ever ending
	if startErr != nil {
		closeFiles(parentEnds)
		return nil, queue.Permanent(fmt.Errorf("start command %q: %w", argv[0], startErr))
	}
	p := &process{pid: cmd.Process.Pid, items: itemsR, stdout: outR, stderr: errR, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// signal signals the command's whole process group and reports whether it had any member.
func (p *process) signal(sig syscall.Signal) bool { return signalGroup(p.pid, sig) }

// stopReadingBy makes reads of the pipes fail after t: whatever escaped the group (setsid) may
// hold them open after the main process exited.
func (p *process) stopReadingBy(t time.Time) {
	for _, f := range []*os.File{p.items, p.stdout, p.stderr} {
		f.SetReadDeadline(t)
	}
}

func (p *process) closePipes() { closeFiles([]*os.File{p.items, p.stdout, p.stderr}) }

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
