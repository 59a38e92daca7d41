package chrometrace

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"testing"

	"github.com/torchmem/torchmem/internal/gosource"
)

// limitName is what a cap is called: MaxEvents, ValueCap, RecordLimit.
var limitName = regexp.MustCompile(`^Max|Cap|Limit`)

// intTypes are the integer types a cap is spelled with.
var intTypes = []string{"int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "uintptr"}

// limitGlobals names the exported package-level variables of f that are
// integer caps: a name like limitName, and an integer type or an integer
// expression (1 << 20, DefaultMaxEvents, int64(n)) as value.
func limitGlobals(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !n.IsExported() || !limitName.MatchString(n.Name) {
					continue
				}
				integer := false
				if vs.Type != nil {
					id, ok := vs.Type.(*ast.Ident)
					integer = ok && slices.Contains(intTypes, id.Name)
				} else if i < len(vs.Values) {
					integer = intExpr(vs.Values[i])
				}
				if integer {
					out = append(out, n.Name)
				}
			}
		}
	}
	return out
}

// intExpr says whether e reads as an integer: a literal, a constant's
// name, arithmetic on them or a conversion to an integer type.
func intExpr(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.INT
	case *ast.Ident:
		return e.Name != "nil" && e.Name != "true" && e.Name != "false"
	case *ast.SelectorExpr:
		return true // pkg.DefaultMaxX
	case *ast.ParenExpr:
		return intExpr(e.X)
	case *ast.UnaryExpr:
		return intExpr(e.X)
	case *ast.BinaryExpr:
		return intExpr(e.X) && intExpr(e.Y)
	case *ast.CallExpr:
		id, ok := e.Fun.(*ast.Ident)
		return ok && slices.Contains(intTypes, id.Name)
	}
	return false
}

// TestNoLimitGlobals: the readers' caps are options (Limits), not package
// variables that a command sets and every reader in the process then
// shares. No package of the module declares an exported integer variable
// named like a cap.
func TestNoLimitGlobals(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	for path, f := range gosource.Tree(t, fset, "..") {
		files++
		for _, v := range limitGlobals(f) {
			t.Errorf("%s: package variable %s is a cap: make it a field of chrometrace.Limits, passed as an option", path, v)
		}
	}
	if files < 100 {
		t.Fatalf("walked %d Go files: not the module", files)
	}
}

// TestLimitGlobalsFindsOne: the check above finds a planted cap, typed or
// not, and passes over what is not one.
func TestLimitGlobalsFindsOne(t *testing.T) {
	src := `package p
var MaxThings = 1 << 20
var (
	EventCap int64
	MaxSeries = DefaultMaxSeries
	RecordLimit = int64(4096)
)
var maxPrivate = 1
const MaxConst = 3
var MaxName = "x"
var MaxFunc = func() int { return 1 }
var ErrLimit = errors.New("limit")
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := limitGlobals(f)
	want := []string{"MaxThings", "EventCap", "MaxSeries", "RecordLimit"}
	if !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
}

// WithDefaults fills zero fields, keeps set ones, and lets the series cap
// follow the records cap.
func TestLimitsWithDefaults(t *testing.T) {
	d := Limits{}.WithDefaults()
	if d.ValueBytes != DefaultMaxValueBytes || d.InputBytes != DefaultMaxInputBytes || d.Events != DefaultMaxEvents ||
		d.MemoryEvents != DefaultMaxMemoryEvents || d.Records != DefaultMaxRecords || d.Series != DefaultMaxSeries {
		t.Errorf("defaults %+v", d)
	}
	if l := (Limits{ValueBytes: 5, Records: 64 << 20}).WithDefaults(); l.ValueBytes != 5 || l.Series != 1<<20 {
		t.Errorf("set fields %+v", l)
	}
}

// TestLimitsIndexable: caps above what the model can index (int32) are
// lowered to it, whoever sets them.
func TestLimitsIndexable(t *testing.T) {
	l := Limits{Events: 1 << 40, MemoryEvents: 1 << 36}.WithDefaults()
	if l.Events != MaxIndexedEvents || l.MemoryEvents != MaxIndexedEvents {
		t.Errorf("caps of 2^40 and 2^36 became %d and %d, want %d", l.Events, l.MemoryEvents, MaxIndexedEvents)
	}
	if l := (Limits{}).WithDefaults(); l.Events != DefaultMaxEvents || l.MemoryEvents != DefaultMaxMemoryEvents {
		t.Errorf("defaults %d, %d changed", l.Events, l.MemoryEvents)
	}
}
