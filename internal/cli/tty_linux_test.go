package cli

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a real pseudo-terminal and returns its terminal side (what a shell's standard
// output is).
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty
}

// A worker started at a terminal does not print CloudWatch's EMF lines into it (a newcomer's
// first worker printed five of them, for the run crawlq demo left, and they read as a crash); it
// says so on its log. Piped or redirected (ECS, a file), they go to standard output as before.
// /dev/null is a character device but no terminal: the old check took it for one.
func TestMonitorMetricsNotPrintedToATerminal(t *testing.T) {
	tty := openPTY(t)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	if out := monitorMetricsOut(tty, logger); out != io.Discard || !strings.Contains(log.String(), "not printed to a terminal") {
		t.Fatalf("at a terminal: metrics to %T, log %q; want them dropped, saying so", out, log.String())
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, f := range map[string]*os.File{"/dev/null": devnull, "a pipe": w} {
		log.Reset()
		if out := monitorMetricsOut(f, logger); out != io.Writer(f) || log.Len() != 0 {
			t.Errorf("%s: metrics to %v, log %q; want them written there, silently", name, out, log.String())
		}
	}
}
