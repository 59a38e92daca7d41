package main

import (
	"go/build"
	"strings"
	"testing"
)

// TestCommandsImportNoAnalysis holds the one-answer design: the commands
// render what rules.Evaluate concluded and never call an analysis
// themselves, so cmd/torchmem imports rules (and the digest format
// rules/summary, which is built on rules), never an analysis package
// below it.
func TestCommandsImportNoAnalysis(t *testing.T) {
	const module = "github.com/torchmem/torchmem/"
	allowed := map[string]bool{
		module + "rules":         true,
		module + "rules/summary": true, // the summary file format (summarize writes it, load reads it)
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
