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

// escapedCells is row r with every string cell escaped by esc.
func escapedCells(r table.Row, esc func(string) string) table.Row {
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

// fill hands the rows, escaped by esc, to go-pretty.
func (t *escapingTable) fill(esc func(string) string) {
	t.Writer.ResetHeaders()
	t.Writer.ResetRows()
	t.Writer.ResetFooters()
	cells := func(r table.Row) table.Row { return escapedCells(r, esc) }
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
// wider, the widest columns wrap at one common width, the largest that
// fits, so that no cell is cut and no line runs past the width; narrow
// columns (numbers) keep their room. Cells wrap at spaces, and a name
// longer than its column at its own joints (after "::", "_", "/", "."),
// never inside a word; a column is not made narrower than its longest
// such piece. A table that cannot fit so (many columns on a narrow
// screen) is printed as one block of "header  value" lines per row.
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
	pieces := t.longestPieces()
	for i, w := range ws {
		if w > capWidth {
			t.limitColumn(i+1, max(capWidth, pieces[i], 4))
		}
	}
	if out := t.Writer.Render(); textWidth(out) <= width {
		return out
	}
	return t.renderRecords(width)
}

// joints are the characters after which a long name may wrap: it reads
// as the name, and searching for either half still finds it.
const joints = "_:/.-,>()#=[]"

// longestPieces is, per column, the widest run of a cell between spaces
// and joints (a joint ends its piece): the narrowest the column can be
// without breaking a word.
func (t *escapingTable) longestPieces() []int {
	return t.widestPerColumn(func(cell string) int {
		w, cur := 0, 0
		for _, r := range cell {
			switch {
			case r == ' ' || r == '\n':
				cur = 0
			case strings.ContainsRune(joints, r):
				w, cur = max(w, cur+1), 0
			default:
				cur++
				w = max(w, cur)
			}
		}
		return w
	})
}

// wrapAtJoints wraps s to width w at spaces; a word longer than w breaks
// after its last joint that fits (a hard break only for a word with no
// joint in reach).
func wrapAtJoints(s string, w int) string {
	if w <= 0 {
		return s
	}
	var lines []string
	for _, line := range strings.Split(s, "\n") {
		lines = append(lines, fillWords(strings.Fields(line), w, w)...)
	}
	return strings.Join(lines, "\n")
}

// cutAtJoint is the head of a word longer than w to put on a line: up to
// its last joint within w characters (the whole of w only for a word
// with no joint in reach).
func cutAtJoint(word string, w int) string {
	rs := []rune(word)
	if len(rs) <= w {
		return word
	}
	for i := w; i > 0; i-- {
		if strings.ContainsRune(joints, rs[i-1]) {
			return string(rs[:i])
		}
	}
	return string(rs[:w])
}

// renderRecords prints the table as one block per row, each cell on a
// line under its header ("steps   0-23"), for a width too narrow for its
// columns side by side.
func (t *escapingTable) renderRecords(width int) string {
	var heads []string
	for _, h := range t.header {
		for i, c := range escapedCells(h.row, escape.TerminalLines) {
			for len(heads) <= i {
				heads = append(heads, "")
			}
			if s := strings.TrimSpace(fmt.Sprint(c)); s != "" {
				heads[i] = strings.TrimSpace(heads[i] + " " + s)
			}
		}
	}
	labelW := 0
	for _, h := range heads {
		labelW = max(labelW, text.StringWidthWithoutEscSequences(h))
	}
	labelW = min(labelW, width/3)
	var b strings.Builder
	n := 0
	for _, r := range append(slices.Clone(t.rows), t.footer...) {
		if r.separator {
			continue
		}
		n++
		if n > 1 {
			b.WriteString("\n")
		}
		for i, c := range escapedCells(r.row, escape.TerminalLines) {
			v := strings.TrimSpace(fmt.Sprint(c))
			if v == "" {
				continue
			}
			label := ""
			if i < len(heads) {
				label = heads[i]
			}
			labels := strings.Split(wrapAtJoints(label, labelW), "\n")
			values := strings.Split(wrapAtJoints(v, width-labelW-4), "\n")
			for k := range max(len(labels), len(values)) {
				l, val := "", ""
				if k < len(labels) {
					l = labels[k]
				}
				if k < len(values) {
					val = values[k]
				}
				fmt.Fprintf(&b, "  %-*s  %s\n", labelW, l, val)
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
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
	t.columns[i].WidthMax, t.columns[i].WidthMaxEnforcer = w, wrapAtJoints
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
