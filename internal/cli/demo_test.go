package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
)

// crawlq demo's summary lists errors_by_kind as words, not a Go map, and it ends with a hint that works when typed next: after make demo the reader's shell has
// no DATABASE_URL, so `crawlq items N` alone fails with "no database configured".
func TestDemoSaysHowToSeeItsItems(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	code, out, errs := run(t, url, "demo", "--items", "24", "--workers", "1")
	if code != 0 {
		t.Fatalf("crawlq demo --items 24: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, "map[") || !strings.Contains(out, "every outcome by kind (errors, retries and skips): redirect 1, robots_disallowed ") {
		t.Errorf("crawlq demo's summary does not list the errors and skips by kind:\n%s", out)
	}
	if !strings.Contains(out, "see them all: crawlq items 1 --limit 10000") || !strings.Contains(out, "export DATABASE_URL=$(make -s db)") {
		t.Errorf("crawlq demo's last hint does not say how to reach its database:\n%s", out)
	}
}

// A demo site started on an address already taken (the README's one still running when the guide
// starts its own) says so and what to do, not only the kernel's "bind: address already in use".
func TestDemoSiteOnATakenAddressSaysWhatToDo(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, _, errs := run(t, "", "demo-site", "--items", "10", "--addr", l.Addr().String())
	if code != 1 || !strings.Contains(errs, l.Addr().String()+" is in use") || !strings.Contains(errs, "jobs -l in the shell that started it") ||
		!strings.Contains(errs, "--addr") {
		t.Errorf("demo-site on a taken address: exit %d, %q", code, errs)
	}
}

// crawlq demo-site --print-spec prints the specs of the script-drawn section that
// internal/demosite holds, ready to push: scripts/soak-browser.sh pushes it rather than a copy.
func TestDemoSitePrintsTheJSSpec(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	for _, c := range []struct {
		kind, name string
		render     bool
	}{{"js", "js", true}, {"js-plain", "js_plain", false}} {
		code, out, errs := run(t, "", "demo-site", "--print-spec", c.kind)
		if want := demosite.JSSpec(c.name, c.render); code != 0 || out != want {
			t.Fatalf("--print-spec %s: exit %d, %q (%s); want %q", c.kind, code, out, errs, want)
		}
		file := filepath.Join(t.TempDir(), c.name+".yaml")
		if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := run(t, url, "spider", "push", file); code != 0 || !strings.Contains(out, c.name+": pushed version 1") {
			t.Errorf("spider push of --print-spec %s: exit %d, %q %q", c.kind, code, out, errs)
		}
	}
	if code, _, errs := run(t, "", "demo-site", "--print-spec", "jss"); code != 2 || !strings.Contains(errs, `--print-spec "jss": want js or js-plain`) {
		t.Errorf("--print-spec jss: exit %d, %q", code, errs)
	}
}
