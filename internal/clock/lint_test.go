package clock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// clocked are the packages whose services tell the time only through a clock.Clock.
var clocked = []string{"maintain", "events", "dispatch"}

// wallReads are the time package's functions that read the wall clock.
var wallReads = map[string]bool{"Now": true, "Since": true, "Until": true}

// TestOnlyTheClockReadsTheTime fails on any time.Now, time.Since or time.Until in the non-test
// files of the clocked packages: there, the time comes from the Clock a process was assembled
// with, so that tests can stop and move it (make verify runs this).
func TestOnlyTheClockReadsTheTime(t *testing.T) {
	for _, pkg := range clocked {
		dir := filepath.Join("..", pkg)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, p := range wallClockReads(t, f) {
				t.Errorf("%s: reads the wall clock; take the time from the service's clock.Clock", p)
			}
		}
	}
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
