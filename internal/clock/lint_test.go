package clock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every package under internal/ tells the time through a clock.Clock (the time of day) or a
// clock.Stopwatch (elapsed wall time), except these, each with its reason.
var exempt = map[string]string{
	"clock":    "it is the clock",
	"testwait": "a test's wait is bounded in wall time, whatever a service's clock says",
	"awstest":  "a test helper, bounding in wall time its wait for a local emulator",
	"bench":    "it measures how long real work takes and reports the time of its runs",
	"cli":      "the command line is an edge: it assembles processes and tells a person the time",
}

// notYet are the packages still reading the wall clock directly, to convert and then drop
// from this list.
var notYet = map[string]bool{}

// wallReads are the time package's functions that read the wall clock.
var wallReads = map[string]bool{"Now": true, "Since": true, "Until": true}

// TestOnlyTheClockReadsTheTime fails on any time.Now, time.Since or time.Until in the non-test
// files of a package under internal/ (but those exempt or not yet converted): there, the time
// comes from the Clock a process was assembled with, so that tests can stop and move it, and
// elapsed time from a Stopwatch (make verify runs this).
func TestOnlyTheClockReadsTheTime(t *testing.T) {
	for _, pkg := range clocked(t) {
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, p := range wallClockReads(t, f) {
				t.Errorf("%s: reads the wall clock; take the time of day from the service's clock.Clock, elapsed time from a clock.Stopwatch", p)
			}
		}
	}
}

// clocked lists the packages under internal/ the check covers: all but exempt and notYet.
func clocked(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || exempt[e.Name()] != "" {
			continue
		}
		if notYet[e.Name()] {
			if !hasWallClockReads(t, e.Name()) {
				t.Errorf("internal/%s reads the wall clock nowhere: drop it from notYet", e.Name())
			}
			continue
		}
		out = append(out, e.Name())
	}
	for _, must := range []string{"queue", "crawl", "maintain", "events", "dispatch"} {
		if !slices.Contains(out, must) {
			t.Errorf("internal/%s is not checked", must)
		}
	}
	return out
}

// hasWallClockReads reports whether a package's non-test files read the wall clock.
func hasWallClockReads(t *testing.T, pkg string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", pkg, "*.go"))
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && len(wallClockReads(t, f)) > 0 {
			return true
		}
	}
	return false
}

// wallClockReads returns the positions of the time package's wall-clock reads in file.
func wallClockReads(t *testing.T, file string) []token.Position {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{} // what the time package is called in this file
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
			name := "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = true
		}
	}
	var out []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] && wallReads[sel.Sel.Name] {
			out = append(out, fset.Position(sel.Pos()))
		}
		return true
	})
	return out
}

// The check finds what it must: each way of reading the wall clock, under the package's own
// name or another, and not a method of the same name on something else.
func TestWallClockReadsAreFound(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.go")
	src := `package x

import (
	"time"
	tm "time"
)

type c struct{}

func (c) Now() time.Time { return time.Time{} }

func f() {
	_ = time.Now()
	_ = tm.Since(time.Time{})
	var f = time.Until
	_ = f
	_ = c{}.Now()
	_ = time.Duration(0)
}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := wallClockReads(t, file)
	var lines []int
	for _, p := range got {
		lines = append(lines, p.Line)
	}
	if len(lines) != 3 || lines[0] != 13 || lines[1] != 14 || lines[2] != 15 {
		t.Fatalf("found wall-clock reads on lines %v, want 13, 14 and 15", lines)
	}
}
