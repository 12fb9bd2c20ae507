package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// docs/internals.md's code layout names every package under internal/, so a new package gets
// its line there.
func TestLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "internals.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join("..", "..", "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		// "internal/NAME/" at a line's start, or "NAME/" among the packages a line lists.
		re := regexp.MustCompile(`(?m)(^internal/` + regexp.QuoteMeta(e.Name()) + `/|[ ]` + regexp.QuoteMeta(e.Name()) + `/)`)
		if !re.Match(b) {
			t.Errorf("docs/internals.md's code layout does not name internal/%s/: add a line saying what it owns", e.Name())
		}
	}
}
