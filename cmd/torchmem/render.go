package main

import (
	"fmt"

	"github.com/torchmem/torchmem/cmd/internal/report"
)

// Output formats shared by every command (the report package's). Not
// every command supports every format; each validates with checkFormat.
const (
	// formatTable is the old name of text; --format table still works
	// (formatAlias), and both constants mean the same output.
	formatTable    = report.Text
	formatText     = report.Text
	formatFolded   = report.Folded
	formatJSON     = report.JSON
	formatCSV      = report.CSV
	formatMarkdown = report.Markdown
	formatSARIF    = report.SARIF
)

func checkFormat(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return badInput(fmt.Errorf("unknown --format %q (want one of %v)", got, allowed))
}

// isTerminal reports whether a file is an interactive terminal: progress
// goes to stderr only there.
var isTerminal = report.IsTerminal

// jsonSchemaVersion is the version of torchmem's JSON documents.
const jsonSchemaVersion = report.SchemaVersion

// termWidth is the width text output fits (report.Width).
func termWidth() int { return report.Width() }
