package report

import (
	"github.com/torchmem/torchmem/rules"

	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// EachInput renders one result per input, the same way for every command:
// text formats one after another (a blank line between), JSON as
// {"inputs": [document, ...]} whatever their number (a script that reads
// one file's output reads a directory's). An error from render stops.
func EachInput[T any](w io.Writer, format string, items []T, render func(w io.Writer, item T) error) error {
	if format != JSON {
		for i, it := range items {
			if i > 0 && (format == Text || format == Markdown) {
				fmt.Fprintln(w)
			}
			if err := render(w, it); err != nil {
				return err
			}
		}
		return nil
	}
	docs := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		var b bytes.Buffer
		if err := render(&b, it); err != nil {
			return err
		}
		docs = append(docs, json.RawMessage(b.Bytes()))
	}
	return WriteJSON(w, struct {
		Inputs []json.RawMessage `json:"inputs"`
	}{docs})
}

// MarkdownFenced writes a text rendering as Markdown: a heading and the
// text in a code block, for reports whose meaning is in alignment
// (segment fill bars, sparklines, wide tables). The fence is longer than
// any run of backticks in the text, so nothing in it can close the block.
func MarkdownFenced(w io.Writer, title string, render func(io.Writer) error) error {
	if _, err := fmt.Fprintf(w, "### %s\n\n", mdEscape(title)); err != nil {
		return err
	}
	return markdownBlock(w, render)
}

// markdownBlock writes what render writes as a fenced code block.
func markdownBlock(w io.Writer, render func(io.Writer) error) error {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		return err
	}
	fence := "```"
	for strings.Contains(b.String(), fence) {
		fence += "`"
	}
	text := strings.TrimRight(b.String(), "\n")
	_, err := fmt.Fprintf(w, "%stext\n%s\n%s\n", fence, text, fence)
	return err
}

// tablesOf are ev's tables by input (a judged evaluation's: what its
// views show of each input).
func tablesOf(ev *rules.Evaluation) map[*rules.Input]*rules.Table {
	out := make(map[*rules.Input]*rules.Table, len(ev.Tables))
	for i := range ev.Tables {
		out[ev.Tables[i].Input] = &ev.Tables[i]
	}
	return out
}
