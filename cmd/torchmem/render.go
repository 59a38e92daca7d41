package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/torchmem/torchmem/cmd/internal/escape"
	"golang.org/x/term"
)

// Output formats shared by every command. Not every command supports every
// format; each validates with checkFormat.
const (
	// formatTable is the old name of text; --format table still works
	// (formatAlias), and both constants mean the same output.
	formatTable    = "text"
	formatText     = "text"
	formatFolded   = "folded"
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

// jsonSchemaVersion is the version of torchmem's JSON documents
// (cmd/torchmem/JSON.md). It changes when a field is renamed, removed or
// changes meaning; added fields do not change it.
const jsonSchemaVersion = 1

// ownSchema marks documents that follow a published schema of their own
// (SARIF): they carry no schema_version.
type ownSchema interface{ ownSchema() }

// writeJSON prints v as indented JSON, with "schema_version" first when v
// is an object. encoding/json is used for output: its field order is the
// struct order, stable for scripts and goldens.
func writeJSON(w io.Writer, v any) error {
	v = withEmptyLists(v)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	out := b.Bytes()
	if _, own := v.(ownSchema); !own {
		out = withSchemaVersion(out)
	}
	_, err := w.Write(out)
	return err
}

// withEmptyLists makes every nil list in v an empty one, so that a list
// is [] in every document, never null (JSON.md's promise, kept here once
// rather than by each type). v is copied first when it is not a pointer;
// what it points to is set in place (the analyses are done by the time
// JSON is written). Types with their own MarshalJSON and byte slices are
// left as they are.
func withEmptyLists(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return v
	}
	if rv.Kind() != reflect.Pointer {
		c := reflect.New(rv.Type())
		c.Elem().Set(rv)
		rv = c
	}
	fillLists(rv, map[uintptr]bool{})
	return rv.Interface()
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

func fillLists(v reflect.Value, seen map[uintptr]bool) {
	if v.Type().Implements(jsonMarshaler) || (v.CanAddr() && v.Addr().Type().Implements(jsonMarshaler) && v.Kind() != reflect.Struct) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		fillLists(v.Elem(), seen)
	case reflect.Interface:
		if !v.IsNil() && v.Elem().Kind() == reflect.Pointer {
			fillLists(v.Elem(), seen)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				fillLists(v.Field(i), seen)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes: a string in JSON
		}
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := range v.Len() {
			fillLists(v.Index(i), seen)
		}
	case reflect.Array:
		for i := range v.Len() {
			fillLists(v.Index(i), seen)
		}
	}
}

// withSchemaVersion puts "schema_version" first in an indented JSON
// object (other documents are returned as they are).
func withSchemaVersion(doc []byte) []byte {
	field := fmt.Sprintf("\"schema_version\": %d", jsonSchemaVersion)
	switch {
	case bytes.HasPrefix(doc, []byte("{\n")):
		return append([]byte("{\n  "+field+",\n"), doc[2:]...)
	case bytes.HasPrefix(doc, []byte("{}")):
		return append([]byte("{\n  "+field+"\n}"), doc[2:]...)
	}
	return doc
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
	return &escapingTable{Writer: t}
}

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

// Render fits the table to the output width (termWidth): when it is
// wider, the widest columns wrap (at spaces where they can) at one common
// width, the largest that fits, so that no cell is cut and no line runs
// past the width; narrow columns (numbers) keep their room.
func (t *escapingTable) Render() string {
	t.fill(escape.TerminalLines)
	out := t.Writer.Render()
	width := termWidth()
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
	var ws []int
	for _, rs := range [][]tableRow{t.header, t.rows, t.footer} {
		for _, r := range rs {
			for i, c := range r.row {
				for len(ws) <= i {
					ws = append(ws, 0)
				}
				for _, word := range strings.Fields(fmt.Sprint(c)) {
					ws[i] = max(ws[i], text.StringWidthWithoutEscSequences(word))
				}
			}
		}
	}
	return ws
}

// columnWidths are the widest cell (its widest line) of each column.
func (t *escapingTable) columnWidths() []int {
	var ws []int
	for _, rs := range [][]tableRow{t.header, t.rows, t.footer} {
		for _, r := range rs {
			for i, c := range r.row {
				for len(ws) <= i {
					ws = append(ws, 0)
				}
				ws[i] = max(ws[i], textWidth(fmt.Sprint(c)))
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

// eachInput renders one result per input, the same way for every command:
// text formats one after another (a blank line between), JSON as
// {"inputs": [document, ...]} whatever their number (a script that reads
// one file's output reads a directory's). render
// may return findings() (exit 1 once all are written); other errors stop.
func eachInput[T any](stdout io.Writer, format string, items []T, render func(w io.Writer, item T) error) error {
	var found error
	keep := func(err error) error {
		var ee *exitError
		if errors.As(err, &ee) && ee.code == exitFindings {
			found = err
			return nil
		}
		return err
	}
	if format != formatJSON {
		for i, it := range items {
			if i > 0 && (format == formatTable || format == formatText || format == formatMarkdown) {
				fmt.Fprintln(stdout)
			}
			if err := keep(render(stdout, it)); err != nil {
				return err
			}
		}
		return found
	}
	docs := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		var b bytes.Buffer
		if err := keep(render(&b, it)); err != nil {
			return err
		}
		docs = append(docs, json.RawMessage(b.Bytes()))
	}
	if err := writeJSON(stdout, struct {
		Inputs []json.RawMessage `json:"inputs"`
	}{docs}); err != nil {
		return err
	}
	return found
}

// writeMarkdownFenced writes a text rendering as Markdown: a heading and
// the text in a code block, for reports whose meaning is in alignment
// (segment fill bars, sparklines, wide tables). The fence is longer than
// any run of backticks in the text, so nothing in it can close the block.
func writeMarkdownFenced(w io.Writer, title string, render func(io.Writer) error) error {
	var b bytes.Buffer
	err := render(&b)
	var ee *exitError
	if err != nil && !(errors.As(err, &ee) && ee.code == exitFindings) {
		return err
	}
	fence := "```"
	for strings.Contains(b.String(), fence) {
		fence += "`"
	}
	text := strings.TrimRight(b.String(), "\n")
	fmt.Fprintf(w, "### %s\n\n%stext\n%s\n%s\n", mdEscape(title), fence, text, fence)
	return err
}
