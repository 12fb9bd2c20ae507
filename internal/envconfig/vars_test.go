package envconfig_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"crawlq/internal/envconfig"
)

const root = "../.."

// TestDocIsFresh: docs/configuration.md is what Vars renders (make docs-config rewrites it).
func TestDocIsFresh(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile(filepath.Join(root, envconfig.DocPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, envconfig.Markdown()) {
		t.Fatalf("%s is stale: run make docs-config", envconfig.DocPath)
	}
}

// notProcessVars are names the code holds that are not crawlq's configuration.
var notProcessVars = map[string]string{
	"CRAWLQ_SCRAPY_PROJECT": "a key crawlq sets in an uploaded spider's spec env, read back from the spec",
	"PYTHONPATH":            "handed on to a Scrapy run (after its egg) when the runner's command.Config.Env has it",
}

var (
	crawlqName = regexp.MustCompile(`^CRAWLQ_[A-Z0-9_]+$`)
	envName    = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	// readers are the functions and methods whose first argument is a variable's name: os's, a
	// getenv function's and envconfig.Env's.
	readers = map[string]bool{"Getenv": true, "getenv": true, "LookupEnv": true, "String": true, "StringOr": true,
		"IsSet": true, "Int": true, "PositiveInt": true, "Duration": true, "Bool": true, "List": true, "OnOff": true}
)

// sources parses every non-test Go file of cmd/, functions/ and internal/ but Vars' own.
func sources(t *testing.T, visit func(path string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd", "functions", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if rel == "internal/envconfig/vars.go" {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			visit(rel, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestVarsMatchTheCode: every variable the code reads is in Vars, and Vars lists none it no
// longer reads. Read means a CRAWLQ_ name written out in the code, or any name passed to a
// getenv, os.LookupEnv or an envconfig.Env method.
func TestVarsMatchTheCode(t *testing.T) {
	t.Parallel()
	read := map[string]string{} // name -> a file that reads it
	sources(t, func(path string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && crawlqName.MatchString(s) {
					if strings.HasSuffix(s, "_") { // a prefix: a family of variables
						s += "*"
					}
					read[s] = path
				}
			case *ast.CallExpr:
				var name string
				switch fn := n.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				if !readers[name] || len(n.Args) == 0 {
					return true
				}
				if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, _ := strconv.Unquote(lit.Value); envName.MatchString(s) {
						read[s] = path
					}
				}
			}
			return true
		})
	})
	listed := map[string]bool{}
	for _, v := range envconfig.Vars {
		if listed[v.Name] {
			t.Errorf("Vars lists %s twice", v.Name)
		}
		listed[v.Name] = true
		if v.Meaning == "" || v.Group == "" || len(v.Read) == 0 {
			t.Errorf("%s: meaning, group and the processes that read it are required", v.Name)
		}
		if _, ok := read[v.Name]; !ok {
			t.Errorf("%s is documented (internal/envconfig/vars.go) but no code reads it", v.Name)
		}
	}
	for name, path := range read {
		if _, skip := notProcessVars[name]; !skip && !listed[name] {
			t.Errorf("%s is read (%s) but not documented: add it to internal/envconfig/vars.go and run make docs-config", name, path)
		}
	}
}

// passThrough are the files that hand their process's whole environment on to a child process
// (terraform; scrapy list) without reading configuration from it. A spider's command and a
// spec's proxy credentials take theirs from the edge (command.Config.Env, crawl.Config.ProxyEnv).
var passThrough = []string{"internal/deploy/deploy.go", "internal/spiderstore/egg.go"}

// TestEnvironmentReadAtTheEdges: os.Getenv, os.LookupEnv and os.Environ appear only in cmd/,
// functions/, internal/cli, lambdafn's Setup and the pass-through files; every other package
// takes its configuration as a struct.
func TestEnvironmentReadAtTheEdges(t *testing.T) {
	t.Parallel()
	sources(t, func(path string, f *ast.File) {
		edge := strings.HasPrefix(path, "cmd/") || strings.HasPrefix(path, "functions/") || strings.HasPrefix(path, "internal/cli/") ||
			path == "internal/lambdafn/lambdafn.go" || strings.HasPrefix(path, "internal/dbtest/") || slices.Contains(passThrough, path)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv" || sel.Sel.Name == "Environ") && !edge {
				t.Errorf("%s reads the environment (os.%s): take a config struct, built at the edge through envconfig", path, sel.Sel.Name)
			}
			return true
		})
	})
}
