package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/torchmem/torchmem/cmd/internal/escape"
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

// The rendering layer (cmd/internal/report) under the names the commands
// not yet moved into it use.
var (
	isTerminal     = report.IsTerminal
	writeJSON      = report.WriteJSON
	newTableWriter = report.NewTable
	renderTable    = report.Table
)

// jsonSchemaVersion is the version of torchmem's JSON documents.
const jsonSchemaVersion = report.SchemaVersion

// termWidth is the width text output fits (report.Width).
func termWidth() int { return report.Width() }

// mdEscape escapes text from the inputs for Markdown outside tables.
func mdEscape(s string) string { return escape.Markdown(s) }

// eachInput is report.EachInput for commands whose render returns
// findings() (exit 1 once every result is written); other errors stop.
func eachInput[T any](stdout io.Writer, format string, items []T, render func(w io.Writer, item T) error) error {
	var found error
	err := report.EachInput(stdout, format, items, func(w io.Writer, it T) error {
		err := render(w, it)
		var ee *exitError
		if errors.As(err, &ee) && ee.code == exitFindings {
			found = err
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return found
}

// writeMarkdownFenced is report.MarkdownFenced.
var writeMarkdownFenced = report.MarkdownFenced
