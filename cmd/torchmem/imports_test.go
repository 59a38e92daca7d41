package main

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCommandsImportNoAnalysis holds the one-answer design: the commands
// render what rules.Evaluate concluded and never call an analysis
// themselves, so cmd/torchmem imports rules (and the digest format
// rules/digest, which is built on rules), never an analysis package
// below it.
func TestCommandsImportNoAnalysis(t *testing.T) {
	const module = "github.com/torchmem/torchmem/"
	allowed := map[string]bool{
		module + "rules":        true,
		module + "rules/digest": true, // the digest file format (summarize writes it, load reads it)
	}
	for _, dir := range []string{".", "load"} {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkg.Imports) == 0 {
			t.Fatalf("%s: no imports read", dir)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module+"rules") && !allowed[imp] {
				t.Errorf("cmd/torchmem/%s imports %s: route what it needs through rules (the Evaluation or rules' vocabulary)", dir, imp)
			}
		}
	}
}

// TestCommandsRenderNothing holds the driver's shape (pprof's): a command
// parses flags, loads, evaluates, hands the evaluation to the report
// package (report.New, report.Generate) and exits. So cmd/torchmem imports
// no rendering library and lays out no table or JSON document itself: only
// cmd/internal/report renders, and every format reads its one model.
func TestCommandsRenderNothing(t *testing.T) {
	renderers := []string{
		"github.com/jedib0t/go-pretty",
		"github.com/go-echarts/go-echarts",
		"html/template",
		"text/template",
		"encoding/csv",
	}
	// Calls into the report package's low-level writers, which only the
	// report package's views should make.
	lowLevel := map[string]bool{"NewTable": true, "Table": true, "WriteJSON": true}
	// Files that may break the rule, each with why (none: every command
	// renders through the report package).
	exceptions := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range []string{".", "load"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			var bad []string
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, r := range renderers {
					if p == r || strings.HasPrefix(p, r+"/") {
						bad = append(bad, "imports "+p)
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "report" && lowLevel[sel.Sel.Name] {
						bad = append(bad, "calls report."+sel.Sel.Name)
					}
				}
				return true
			})
			name := filepath.ToSlash(path)
			if _, excepted := exceptions[name]; excepted {
				if len(bad) == 0 {
					t.Errorf("%s renders nothing any more: remove its exception", name)
				}
				continue
			}
			for _, b := range bad {
				t.Errorf("cmd/torchmem/%s %s: render through report.New and report.Generate", name, b)
			}
		}
	}
}
