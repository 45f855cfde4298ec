// Package codeshape holds the test that keeps the code's shape rules: a
// function of at most 60 lines, a file of at most 400 and a package of at
// most 4,000 lines of non-test Go, and no package under async/ that
// imports store. The rules are ours; this test is where they are kept.
package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	maxFuncLines    = 60
	maxFileLines    = 400
	maxPackageLines = 4000
)

// root returns the module's root, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// sources parses every non-test Go file of the module (the bench module,
// which has its own go.mod, included), keyed by path relative to the root.
func sources(t *testing.T) (map[string]*ast.File, *token.FileSet) {
	t.Helper()
	top := root(t)
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, path)
		files[rel] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("found no Go files")
	}
	return files, fset
}

func TestFunctionsAreShort(t *testing.T) {
	files, fset := sources(t)
	for path, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFuncLines {
				t.Errorf("%s: func %s is %d lines, more than %d", path, fn.Name.Name, n, maxFuncLines)
			}
		}
	}
}

func TestFilesAndPackagesAreSmall(t *testing.T) {
	files, fset := sources(t)
	perPackage := map[string]int{}
	for path, f := range files {
		n := fset.Position(f.End()).Line
		if tf := fset.File(f.Pos()); tf != nil {
			n = tf.LineCount()
		}
		if n > maxFileLines {
			t.Errorf("%s is %d lines, more than %d", path, n, maxFileLines)
		}
		perPackage[filepath.Dir(path)] += n
	}
	for dir, n := range perPackage {
		if n > maxPackageLines {
			t.Errorf("package %s has %d lines of non-test Go, more than %d", dir, n, maxPackageLines)
		}
	}
}

// TestAsyncDependsOnTheDomainOnly keeps the pipeline free of store: cmd
// passes *store.DB in through the root package's interfaces.
func TestAsyncDependsOnTheDomainOnly(t *testing.T) {
	files, _ := sources(t)
	for path, f := range files {
		if !strings.HasPrefix(path, "async"+string(filepath.Separator)) {
			continue
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasSuffix(p, "/store") {
				t.Errorf("%s imports %s: the pipeline depends on the domain alone", path, p)
			}
		}
	}
}
