package report

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/cmd/internal/escape"
)

// NewTable makes a go-pretty table for the given format. Colours are
// off unless stdout is a terminal (go-pretty decides from TERM otherwise and
// would put ANSI codes into Markdown and CSV).
func NewTable() table.Writer {
	if !IsTerminal(os.Stdout) {
		colorsOff.Do(text.DisableColors) // a process-wide switch: set once, not per table
	}
	t := table.NewWriter()
	style := table.StyleLight
	// Keep header case as written: the columns are torch's own names.
	style.Format.Header = text.FormatDefault
	t.SetStyle(style)
	return &escapingTable{Writer: t}
}

// colorsOff turns go-pretty's colours off once: text.DisableColors writes
// a package variable, which tables rendered side by side (the tests run
// commands in parallel) would otherwise write at once.
var colorsOff sync.Once

// escapingTable is every table torchmem prints: it keeps the rows as
// given and escapes each string cell for the medium when rendered
// (escape.TerminalLines for text, escape.Markdown for Markdown; CSV is quoted
// by go-pretty), so no renderer has to remember to. Cells of type
// escape.MarkdownText are Markdown written by torchmem and pass as they
// are.
type escapingTable struct {
	table.Writer
	header, footer []tableRow
	rows           []tableRow
	columns        []table.ColumnConfig
}

// SetColumnConfigs keeps the caller's column settings, so that fitting
// the table to the width adds to them rather than replacing them.
func (t *escapingTable) SetColumnConfigs(c []table.ColumnConfig) {
	t.columns = slices.Clone(c)
	t.Writer.SetColumnConfigs(c)
}

type tableRow struct {
	row       table.Row
	cfg       []table.RowConfig
	separator bool
}

func (t *escapingTable) AppendHeader(r table.Row, cfg ...table.RowConfig) {
	t.header = append(t.header, tableRow{row: r, cfg: cfg})
}
func (t *escapingTable) AppendFooter(r table.Row, cfg ...table.RowConfig) {
	t.footer = append(t.footer, tableRow{row: r, cfg: cfg})
}
func (t *escapingTable) AppendRow(r table.Row, cfg ...table.RowConfig) {
	t.rows = append(t.rows, tableRow{row: r, cfg: cfg})
}
func (t *escapingTable) AppendRows(rs []table.Row, cfg ...table.RowConfig) {
	for _, r := range rs {
		t.AppendRow(r, cfg...)
	}
}
func (t *escapingTable) AppendSeparator() { t.rows = append(t.rows, tableRow{separator: true}) }
func (t *escapingTable) Length() int {
	n := 0
	for _, r := range t.rows {
		if !r.separator {
			n++
		}
	}
	return n
}

// fill hands the rows, escaped by esc, to go-pretty.
func (t *escapingTable) fill(esc func(string) string) {
	t.Writer.ResetHeaders()
	t.Writer.ResetRows()
	t.Writer.ResetFooters()
	cells := func(r table.Row) table.Row {
		out := make(table.Row, len(r))
		for i, c := range r {
			switch v := c.(type) {
			case escape.MarkdownText:
				out[i] = escape.Terminal(string(v)) // already Markdown; no terminal controls either way
			case string:
				out[i] = esc(v)
			case fmt.Stringer:
				out[i] = esc(v.String())
			default:
				out[i] = c
			}
		}
		return out
	}
	for _, r := range t.header {
		t.Writer.AppendHeader(cells(r.row), r.cfg...)
	}
	for _, r := range t.rows {
		if r.separator {
			t.Writer.AppendSeparator()
			continue
		}
		t.Writer.AppendRow(cells(r.row), r.cfg...)
	}
	for _, r := range t.footer {
		t.Writer.AppendFooter(cells(r.row), r.cfg...)
	}
}

// Render fits the table to the output width (Width): when it is
// wider, the widest columns wrap (at spaces where they can) at one common
// width, the largest that fits, so that no cell is cut and no line runs
// past the width; narrow columns (numbers) keep their room.
func (t *escapingTable) Render() string {
	t.fill(escape.TerminalLines)
	out := t.Writer.Render()
	width := Width()
	over := textWidth(out) - width
	if over <= 0 {
		return out
	}
	ws := t.columnWidths()
	total := 0
	for _, w := range ws {
		total += w
	}
	room := total - over // what the cells may take in all
	// The common cap: the largest c with sum(min(w, c)) <= room.
	sorted := slices.Clone(ws)
	slices.Sort(sorted)
	capWidth, used := 0, 0
	for i, w := range sorted {
		rest := len(sorted) - i
		if c := (room - used) / rest; c < w {
			capWidth = c
			break
		}
		used += w
	}
	// A column is not made narrower than its longest word (an operator
	// name, a figure), up to 24 cells and a fifth of the width: a name
	// broken mid-word is harder to read (and to search) than a table a
	// little wider than the screen; on a narrow screen, fitting wins.
	words := t.longestWords()
	for i, w := range ws {
		if w > capWidth {
			t.limitColumn(i+1, max(capWidth, min(words[i], 24, width/5), 6))
		}
	}
	return t.Writer.Render()
}

// longestWords is the longest space-free run of each column's cells.
func (t *escapingTable) longestWords() []int {
	return t.widestPerColumn(func(cell string) int {
		w := 0
		for _, word := range strings.Fields(cell) {
			w = max(w, text.StringWidthWithoutEscSequences(word))
		}
		return w
	})
}

// columnWidths are the widest cell (its widest line) of each column.
func (t *escapingTable) columnWidths() []int { return t.widestPerColumn(textWidth) }

// widestPerColumn is the largest measure of any cell of each column,
// header and footer included.
func (t *escapingTable) widestPerColumn(measure func(cell string) int) []int {
	var ws []int
	for _, rs := range [][]tableRow{t.header, t.rows, t.footer} {
		for _, r := range rs {
			for i, c := range r.row {
				for len(ws) <= i {
					ws = append(ws, 0)
				}
				ws[i] = max(ws[i], measure(fmt.Sprint(c)))
			}
		}
	}
	return ws
}

// limitColumn wraps column number n (1-based) at width w.
func (t *escapingTable) limitColumn(n, w int) {
	i := slices.IndexFunc(t.columns, func(c table.ColumnConfig) bool { return c.Number == n })
	if i < 0 {
		t.columns = append(t.columns, table.ColumnConfig{Number: n})
		i = len(t.columns) - 1
	}
	t.columns[i].WidthMax, t.columns[i].WidthMaxEnforcer = w, text.WrapSoft
	t.Writer.SetColumnConfigs(t.columns)
}

// textWidth is the display width of the widest line of s.
func textWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, text.StringWidthWithoutEscSequences(l))
	}
	return w
}

func (t *escapingTable) RenderMarkdown() string {
	t.fill(escape.Markdown)
	return t.Writer.RenderMarkdown()
}

// RenderCSV: go-pretty quotes fields holding quotes, commas or newlines;
// escape.CSV shows the other control characters (a bare carriage return
// would end a record) as escapes.
func (t *escapingTable) RenderCSV() string {
	t.fill(escape.CSV)
	return t.Writer.RenderCSV()
}
