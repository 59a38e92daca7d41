// Package gosource parses the module's own Go files for the tests that
// check its structure (what cmd/torchmem imports and prints, what the
// report package computes, which package variables are caps): one walker,
// one rule for which files count, instead of one per test file.
package gosource

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"iter"
	"path/filepath"
	"strings"
	"testing"
)

// Files yields each non-test Go file of dir, in name order, with its
// parsed syntax; a folder with none fails the test (a check over no file
// checks nothing).
func Files(t testing.TB, fset *token.FileSet, dir string) iter.Seq2[string, *ast.File] {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	return func(yield func(string, *ast.File) bool) {
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			if !yield(path, parse(t, fset, path)) {
				return
			}
		}
	}
}

// Tree yields each non-test Go file below root, skipping testdata and
// hidden or underscore folders as the go command does.
func Tree(t testing.TB, fset *token.FileSet, root string) iter.Seq2[string, *ast.File] {
	t.Helper()
	return func(yield func(string, *ast.File) bool) {
		stop := false
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || stop {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
				stop = !yield(path, parse(t, fset, path))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func parse(t testing.TB, fset *token.FileSet, path string) *ast.File {
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
