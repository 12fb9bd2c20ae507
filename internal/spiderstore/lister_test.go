package spiderstore_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"crawlq/internal/spiderstore"
)

// TestScrapyListerKeepsTheCause: an egg whose spider module fails to import is refused with the
// exception that says why (it was clipped to 64 bytes of the traceback's last three lines, which
// cut the ModuleNotFoundError off).
func TestScrapyListerKeepsTheCause(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("/usr/bin/scrapy"); err != nil {
		t.Fatalf("Scrapy is missing (%v): install Debian's python3-scrapy (scripts/deps.sh test)", err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{
		"EGG-INFO/entry_points.txt":        "[scrapy]\nsettings = broken.settings\n",
		"broken/__init__.py":               "",
		"broken/settings.py":               "SPIDER_MODULES = ['broken.spiders']\n",
		"broken/spiders/__init__.py":       "",
		"broken/spiders/needs_a_module.py": "import scrapy\nimport crawlq_no_such_module_for_the_test\n",
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := spiderstore.ParseEgg(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	_, err = spiderstore.ScrapyLister{Scrapy: "/usr/bin/scrapy"}.List(context.Background(), buf.Bytes(), info)
	want := "ModuleNotFoundError: No module named 'crawlq_no_such_module_for_the_test'"
	if !errors.Is(err, spiderstore.ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Traceback") {
		t.Fatalf("got %v\nwant ErrInvalid with %q and the traceback", err, want)
	}
	if n := len(err.Error()); n > 4300 {
		t.Errorf("error of %d bytes: want it bounded", n)
	}
}
