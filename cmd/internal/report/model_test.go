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
	"runtime"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/gosource"
)

const module = "github.com/torchmem/torchmem/"

// reportMayCall are the functions of the packages that compute (rules,
// chrometrace, memtimeline and theirs) the report package may call, each
// with why: they format, name or classify what the Evaluation holds, or
// read a figure it already has; they analyze nothing. Methods are named
// pkg.(*T).M or pkg.T.M.
var reportMayCall = map[string]string{
	"memtimeline.FormatBytes":             "formats a figure",
	"memtimeline.FormatDuration":          "formats a figure",
	"memtimeline.Series.Len":              "a series' length",
	"chrometrace.InnermostFrame":          "picks the frame a cell shows",
	"chrometrace.Frame.IsPython":          "kind of a frame",
	"chrometrace.IsGeneratedFrame":        "kind of a frame",
	"chrometrace.(*Step).End":             "a step's end (start + duration)",
	"chrometrace.DeviceType.IsGPU":        "kind of a device",
	"chrometrace.(*Trace).Str":            "an interned string's text",
	"chrometrace.SubSat":                  "a cell's difference of two recorded figures",
	"snapshot.FrameName":                  "formats a frame",
	"snapshot.FormatSegmentMap":           "formats the segment table as torch's _memory_viz does",
	"snapshot.(*AllocatorSettings).Has":   "whether a setting was recorded",
	"site.(*Location).String":             "formats a location",
	"frag.ReservedDrop.Cause":             "names a drop's cause",
	"exported.(*Timeline).Len":            "a timeline's length",
	"growth.Default":                      "the growth model's constants, printed as they are",
	"leak.MarkerName":                     "the wording of a leak's marker",
	"rules.Severity.String":               "names a severity",
	"rules.SiteLabel":                     "names a site",
	"rules.SiteValue":                     "which figure a folded stack weighs (--weight)",
	"rules.IsLeakRule":                    "kind of a rule",
	"rules.LeakAnswer.Figure":             "formats the answer's figure",
	"rules.(*Verdict).Status":             "the verdict's word",
	"rules.(*Evaluation).Passed":          "the gate's outcome",
	"rules.(*DiffAnswer).Passed":          "the gate's outcome",
	"rules.(*Evaluation).FindingsFor":     "selects a file's findings",
	"rules.(*Input).Has":                  "kind of an input",
	"rules.(*Input).Is":                   "kind of an input",
	"rules.(*Input).IsDigest":             "kind of an input",
	"rules.(*Input).InputKind":            "kind of an input",
	"memtimeline.(*DeviceTimeline).Label": "names a device",
	"memtimeline.Downsample":              "chart: fits a series to the points it draws",
	"memtimeline.DownsampleIndices":       "chart: fits series to the points it draws",
	"memtimeline.Series.Pick":             "chart: the points it draws",
	"memtimeline.Series.Max":              "chart: the axis' top",
}

// reportExceptions are the computations still in the report package,
// keyed "file.go: name" as computations reports them, each with why; an
// exception no call needs any more fails the test (remove it).
var reportExceptions = map[string]string{
	// Layout and the order of maps, not the model's order.
	"table.go: sorts (slices.Sort)":             "fitting columns to the width: the widths sorted to find the common cap (layout)",
	"snapshot.go: sorts (sort.Slice)":           "allocator settings are a map: printed in key order",
	"snapshot.go: sorts (sort.Strings)":         "allocator settings are a map: printed in key order",
	"steps.go: sorts (sort.Strings)":            "a step log's keys are a map: printed in key order",
	"verdict.go: sorts (slices.SortStableFunc)": "a composition's categories largest first in a sentence; the bar and the JSON keep rules' category order",
}

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
func typeCheck(t *testing.T, dir, extra string) (*token.FileSet, []*ast.File, *types.Info) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goCmd, "list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}", "./"+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v: %s", err, stderr.String())
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			exports[k] = v
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, f := range gosource.Files(t, fset, dir) {
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
	if _, err := conf.Check(filepath.ToSlash(filepath.Join(module+"cmd/internal/report", dir)), fset, files, info); err != nil {
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
	fset, files, info := typeCheck(t, ".", planted)
	var real []string
	caught := 0
	// The chart package draws: it computes nothing either (it fits a
	// series to the points it draws).
	cf, cfiles, cinfo := typeCheck(t, "chart", "")
	for _, c := range append(computations(fset, files, info), computations(cf, cfiles, cinfo)...) {
		if strings.HasPrefix(c, "planted.go:") {
			caught++
			continue
		}
		real = append(real, c)
	}
	// The check catches what it is meant to: a file planted beside the
	// package's that sorts, asks an input for an analysis and calls one.
	if caught != plantedViolations {
		t.Errorf("the planted file's %d violations: %d caught", plantedViolations, caught)
	}
	used := map[string]bool{}
	for _, c := range real {
		file, rest, _ := strings.Cut(c, ":")
		_, what, _ := strings.Cut(rest, ": ")
		key := file + ": " + what
		if _, ok := reportExceptions[key]; ok {
			used[key] = true
			continue
		}
		t.Errorf("%s: the report lays out the Evaluation; compute this in rules (a Table field) or, if it only formats, add it to reportMayCall", c)
	}
	for key := range reportExceptions {
		if !used[key] {
			t.Errorf("exception %q: no call needs it any more; remove it", key)
		}
	}
}

// planted breaks the rule in the ways the check must catch: a sort from
// package sort and one from slices, an Input's analysis, a rules
// function that computes.
const planted = `package report

import (
	"slices"
	"sort"

	"github.com/torchmem/torchmem/rules"
)

func plantedBreaks(in *rules.Input, xs []int) {
	sort.Ints(xs)
	slices.Sort(xs)
	_ = in.Leaks()
	_ = rules.TraceCharts(in.Trace)
	_ = in.Has(rules.SourceTrace) // allowed: not counted
}
`

const plantedViolations = 4
