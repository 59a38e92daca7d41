package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"golang.org/x/term"
)

// Output formats shared by every command. Not every command supports every
// format; each validates with checkFormat.
const (
	formatTable    = "table"
	formatText     = "text"
	formatJSON     = "json"
	formatCSV      = "csv"
	formatMarkdown = "markdown"
	formatSARIF    = "sarif"
)

func checkFormat(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return badInput(fmt.Errorf("unknown --format %q (want one of %v)", got, allowed))
}

// isTerminal reports whether f is an interactive terminal; progress and
// colour go only there.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// writeJSON prints v as indented JSON. encoding/json is used for output:
// its field order is the struct order, stable for scripts and goldens.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// newTableWriter makes a go-pretty table for the given format. Colours are
// off unless stdout is a terminal (go-pretty decides from TERM otherwise and
// would put ANSI codes into Markdown and CSV).
func newTableWriter() table.Writer {
	if !isTerminal(os.Stdout) {
		text.DisableColors()
	}
	t := table.NewWriter()
	style := table.StyleLight
	// Keep header case as written: the columns are torch's own names.
	style.Format.Header = text.FormatDefault
	t.SetStyle(style)
	return t
}

// renderTable writes t in the chosen format: table, csv or markdown.
func renderTable(w io.Writer, t table.Writer, format string) {
	switch format {
	case formatCSV:
		fmt.Fprintln(w, t.RenderCSV())
	case formatMarkdown:
		fmt.Fprintln(w, t.RenderMarkdown())
	default:
		fmt.Fprintln(w, t.Render())
	}
}
