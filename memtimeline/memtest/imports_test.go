package memtest

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsOnlyChrometrace keeps memtest importable by every package's
// internal tests: were it to import memtimeline or one of its readers,
// their own tests could no longer import it (an import cycle).
func TestImportsOnlyChrometrace(t *testing.T) {
	const module = "github.com/torchmem/torchmem/"
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module) && path != module+"chrometrace" {
				t.Errorf("%s imports %s: only chrometrace may be imported", f, path)
			}
		}
	}
}
