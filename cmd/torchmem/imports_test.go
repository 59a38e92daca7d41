package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/gosource"
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
		for path, f := range gosource.Files(t, fset, dir) {
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

// TestCommandsCallNoAnalysis holds what the README says of cmd/torchmem:
// every command is flags -> rules.Options -> answer -> report -> exit, so
// the commands call no analysis. Of the packages that compute (rules,
// chrometrace, memtimeline and theirs), package main calls only the
// functions below: rules.Evaluate, and only in answer.go; what makes an
// input, a rule set or an option from what the user gave; and summarize's
// digest (digest.Make: the map step writes what the evaluation reads
// back). The loader (package load) calls the readers and sniffers only.
func TestCommandsCallNoAnalysis(t *testing.T) {
	const module = "github.com/torchmem/torchmem/"
	computes := func(p string) bool {
		for _, root := range []string{"rules", "chrometrace", "memtimeline"} {
			if p == module+root || strings.HasPrefix(p, module+root+"/") {
				return true
			}
		}
		return false
	}
	allowed := map[string]map[string]string{
		".": {
			"rules.Evaluate": "answer.go", "rules.NewInput": "", "rules.NewRuleSet": "", "rules.ParseConfig": "",
			"rules.ParseBudget": "", "rules.DefaultRuleSet": "", "rules.DefaultLeakOptions": "", "rules.DefaultFragOptions": "",
			"rules.OperatorOrder": "", "rules.SiteValue": "", "memtimeline.ParseBytes": "", "smi.DefaultOptions": "",
			"steplog.DefaultOptions": "", "digest.Make": "", "digest.Names": "", "splice.Events": "annotate.go",
		},
		"load": {
			"chrometrace.Read": "", "chrometrace.NewInput": "", "chrometrace.NewInputCPUs": "", "chrometrace.OneLine": "", "chrometrace.LooksLikeTrace": "",
			"memtimeline.LimitInput": "", "snapshot.ReadLimited": "", "snapshot.LooksLike": "", "smi.ReadLimited": "",
			"smi.ReadAppsLimited": "", "smi.LooksLike": "", "smi.LooksLikeApps": "", "steplog.ReadLimited": "", "steplog.LooksLike": "",
			"memsummary.ReadLimited": "", "memsummary.LooksLike": "", "exported.ReadLimited": "", "exported.LooksLike": "",
			"digest.Read": "", "digest.LooksLike": "",
		},
	}
	fset := token.NewFileSet()
	for dir, ok := range allowed {
		checked := 0
		for path, f := range gosource.Files(t, fset, dir) {
			pkgs := map[string]bool{} // the local names of packages that compute
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if computes(p) {
					name := p[strings.LastIndex(p, "/")+1:]
					if imp.Name != nil {
						name = imp.Name.Name
					}
					pkgs[name] = true
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, isCall := n.(*ast.CallExpr)
				if !isCall {
					return true
				}
				sel, isSel := call.Fun.(*ast.SelectorExpr)
				if !isSel {
					return true
				}
				id, isID := sel.X.(*ast.Ident)
				if !isID || !pkgs[id.Name] || id.Obj != nil {
					return true
				}
				checked++
				name := id.Name + "." + sel.Sel.Name
				file, allowedHere := ok[name]
				switch {
				case !allowedHere:
					t.Errorf("%s calls %s: an analysis belongs in rules.Evaluate (answer) and its result in the Evaluation", fset.Position(call.Pos()), name)
				case file != "" && filepath.Base(path) != file:
					t.Errorf("%s calls %s, which only %s calls", fset.Position(call.Pos()), name, file)
				}
				return true
			})
		}
		if checked == 0 {
			t.Errorf("%s: no call checked", dir)
		}
	}
}

// TestCommandsPrintNothing holds the other half: cmd/torchmem prints no
// answer. What goes to stdout is the report package's (report.Generate,
// report.SummaryWritten); what goes to stderr beside it is a message
// through warn, note and say (answer.go), or main's exit and crash lines.
func TestCommandsPrintNothing(t *testing.T) {
	// The functions that may print, by file.
	printers := map[string][]string{"answer.go": {"warn", "note", "say"}, "main.go": {"run", "reportBug"}}
	// The functions that name the process's streams: main hands them to
	// run, the progress bars draw on a terminal's stderr, the profiles
	// warn there before any command runs.
	streams := []string{"main", "progressBar", "summarizeProgress", "startProfiles", "startTo"}
	// Files that may break the rule, each with why.
	exceptions := map[string]string{
		"snippet.go": "copies examples.TorchmemProfile to stdout byte for byte: a file, not an answer",
	}
	fset := token.NewFileSet()
	for _, dir := range []string{".", "load"} {
		for path, f := range gosource.Files(t, fset, dir) {
			var bad []string
			for _, d := range f.Decls {
				fn, isFn := d.(*ast.FuncDecl)
				if !isFn || (dir == "." && slices.Contains(printers[filepath.Base(path)], fn.Name.Name)) {
					continue
				}
				ast.Inspect(fn, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok {
							switch name := id.Name + "." + sel.Sel.Name; {
							case id.Name == "fmt" && (strings.HasPrefix(sel.Sel.Name, "Print") || strings.HasPrefix(sel.Sel.Name, "Fprint")),
								name == "io.WriteString", name == "io.Copy",
								(name == "os.Stdout" || name == "os.Stderr") && !slices.Contains(streams, fn.Name.Name):
								bad = append(bad, fmt.Sprintf("%s: %s in %s", fset.Position(sel.Pos()), name, fn.Name.Name))
							}
						}
					}
					return true
				})
			}
			if why, ok := exceptions[filepath.Base(path)]; ok && dir == "." {
				if len(bad) == 0 {
					t.Errorf("%s prints nothing any more (%s): remove its exception", path, why)
				}
				continue
			}
			for _, b := range bad {
				t.Errorf("%s: print through the report package (stdout) or warn/note/say (stderr)", b)
			}
		}
	}
}

// TestRulesDrawNoCharts holds the layering the README states: rules keeps
// series (rules.MemoryChart), the report package draws them, so no
// package under rules imports a chart or rendering package.
func TestRulesDrawNoCharts(t *testing.T) {
	root := filepath.Join("..", "..", "rules")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() == "testdata" {
			if d != nil && d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return err
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files
		}
		checked++
		for _, imp := range pkg.Imports {
			if strings.HasSuffix(imp, "/chart") || strings.Contains(imp, "go-echarts") || imp == "html/template" || strings.Contains(imp, "/cmd/") {
				t.Errorf("%s imports %s: rules keeps series; cmd/internal/report/chart draws them", path, imp)
			}
		}
		return nil
	})
	if err != nil || checked < 5 {
		t.Fatalf("walked %d packages under rules: %v", checked, err)
	}
}
