package report

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/torchmem/torchmem/"

// reportMayCall are the functions of the packages that compute (rules,
// chrometrace, memtimeline and theirs) the report package may call: they
// format, name or classify what the Evaluation holds; they analyze
// nothing. Methods are named (*T).M or T.M.
var reportMayCall = map[string]string{}

// computes says whether a package computes (an analysis may live in it).
func computes(path string) bool {
	for _, root := range []string{"rules", "chrometrace", "memtimeline"} {
		if path == module+root || strings.HasPrefix(path, module+root+"/") {
			return true
		}
	}
	return false
}

// sorts says whether fn sorts: the report lays out the Evaluation's
// order, it makes none of its own.
func sorts(fn *types.Func) bool {
	if fn.Pkg() == nil {
		return false
	}
	switch fn.Pkg().Path() {
	case "sort":
		return true
	case "slices":
		return strings.HasPrefix(fn.Name(), "Sort") || fn.Name() == "Sorted" || fn.Name() == "SortedFunc" || fn.Name() == "SortedStableFunc"
	}
	return false
}

// funcName is fn as reportMayCall names it: pkg.F, or pkg.(*T).M / pkg.T.M.
func funcName(fn *types.Func) string {
	pkg := fn.Pkg().Name()
	sig, _ := fn.Type().(*types.Signature)
	if sig == nil || sig.Recv() == nil {
		return pkg + "." + fn.Name()
	}
	t := sig.Recv().Type()
	ptr := ""
	if p, ok := t.(*types.Pointer); ok {
		t, ptr = p.Elem(), "*"
	}
	n, _ := t.(*types.Named)
	if n == nil {
		return pkg + "." + fn.Name() // an interface's method
	}
	if ptr != "" {
		return fmt.Sprintf("%s.(*%s).%s", pkg, n.Obj().Name(), fn.Name())
	}
	return fmt.Sprintf("%s.%s.%s", pkg, n.Obj().Name(), fn.Name())
}

// computations lists each call in files that sorts or calls into a
// package that computes beyond reportMayCall, as "file:line: name".
func computations(fset *token.FileSet, files []*ast.File, info *types.Info) []string {
	var out []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			fn, ok := info.Uses[id].(*types.Func)
			if !ok || fn.Pkg() == nil {
				return true
			}
			name := funcName(fn)
			pos := fset.Position(id.Pos())
			where := fmt.Sprintf("%s:%d", filepath.Base(pos.Filename), pos.Line)
			switch {
			case sorts(fn):
				out = append(out, where+": sorts ("+name+")")
			case computes(fn.Pkg().Path()):
				if _, ok := reportMayCall[name]; !ok {
					out = append(out, where+": calls "+name)
				}
			}
			return true
		})
	}
	return out
}

// typeCheck parses the report package's non-test files (and extra, a
// planted file's source, when given) and type-checks them against the
// compiled export data of their imports.
func typeCheck(t *testing.T, extra string) (*token.FileSet, []*ast.File, *types.Info) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	list, err := cmd.Output()
	if err != nil {
		t.Skipf("go list -export: %v: %s", err, stderr.String())
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			exports[k] = v
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for path, f := range goFiles(t, fset, ".") {
		_ = path
		files = append(files, f)
	}
	if extra != "" {
		f, err := parser.ParseFile(fset, "planted.go", extra, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(module+"cmd/internal/report", fset, files, info); err != nil {
		t.Fatal(err)
	}
	return fset, files, info
}

// TestReportComputesNothing holds what the package doc says: the report
// lays out the Evaluation (everything a view shows is computed in rules,
// once per input) and computes nothing itself: no sort, no call into
// rules.Input's analyses or any analysis function, only the formatting
// and naming helpers of reportMayCall.
func TestReportComputesNothing(t *testing.T) {
	fset, files, info := typeCheck(t, "")
	for _, c := range computations(fset, files, info) {
		t.Error(c)
	}
}

// goFiles yields each non-test Go file of dir with its parsed syntax.
func goFiles(t *testing.T, fset *token.FileSet, dir string) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	out := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = f
	}
	_ = slices.Sort[[]string]
	return out
}
