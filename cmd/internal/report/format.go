package report

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/jedib0t/go-pretty/v6/table"
	"golang.org/x/term"
)

// Output formats shared by every command. Not every command supports
// every format; each validates its own.
const (
	Text     = "text"
	Folded   = "folded"
	JSON     = "json"
	CSV      = "csv"
	Markdown = "markdown"
	SARIF    = "sarif"
	HTML     = "html"
)

// IsTerminal reports whether f is an interactive terminal; progress and
// colour go only there.
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// Width is the width text output fits: $COLUMNS, else the terminal's
// width when stdout is one, else 100.
func Width() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n >= 40 {
		return min(n, 400)
	}
	if IsTerminal(os.Stdout) {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w >= 40 {
			return w
		}
	}
	return 100
}

// Table writes t in the chosen format: text, csv or markdown.
func Table(w io.Writer, t table.Writer, format string) {
	switch format {
	case CSV:
		fmt.Fprintln(w, t.RenderCSV())
	case Markdown:
		fmt.Fprintln(w, t.RenderMarkdown())
	default:
		fmt.Fprintln(w, t.Render())
	}
}
