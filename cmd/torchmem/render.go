package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/cmd/internal/render"
)

// Output formats shared by every command (render's). Not every command
// supports every format; each validates with checkFormat.
const (
	// formatTable is the old name of text; --format table still works
	// (formatAlias), and both constants mean the same output.
	formatTable    = render.Text
	formatText     = render.Text
	formatFolded   = render.Folded
	formatJSON     = render.JSON
	formatCSV      = render.CSV
	formatMarkdown = render.Markdown
	formatSARIF    = render.SARIF
)

func checkFormat(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return badInput(fmt.Errorf("unknown --format %q (want one of %v)", got, allowed))
}

// The rendering layer (cmd/internal/render) under the names the commands use.
var (
	isTerminal     = render.IsTerminal
	writeJSON      = render.WriteJSON
	newTableWriter = render.NewTable
	renderTable    = render.Table
)

// jsonSchemaVersion is the version of torchmem's JSON documents.
const jsonSchemaVersion = render.SchemaVersion

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
