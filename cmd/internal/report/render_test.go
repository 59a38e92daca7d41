package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestWrapWriterHangsUnderTheLabel(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"short line as is", "LEAK   fine\n", "LEAK   fine\n"},
		{"verdict word", "LEAK   one two three four five six\n", "LEAK   one two three\n       four five six\n"},
		{"checklist mark", "[fail] aaaa bbbb cccc dddd\n", "[fail] aaaa bbbb\n       cccc dddd\n"},
		{"table line kept", "│ " + strings.Repeat("x ", 20) + "│\n", "│ " + strings.Repeat("x ", 20) + "│\n"},
		{"word longer than a line", "  " + strings.Repeat("y", 30) + "\n", "  " + strings.Repeat("y", 18) + "\n    " + strings.Repeat("y", 12) + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWrapWriter(&b, 20)
			if _, err := w.Write([]byte(c.in)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), c.want)
			}
		})
	}
}

type sarifLike struct {
	Runs []int `json:"runs"`
}

func (sarifLike) OwnSchema() {}

func TestWriteJSONVersionAndEmptyLists(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, struct {
		Items []string `json:"items"`
		Inner *struct {
			More []int `json:"more"`
		} `json:"inner"`
	}{Inner: &struct {
		More []int `json:"more"`
	}{}}); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"schema_version\": 1,\n  \"items\": [],\n  \"inner\": {\n    \"more\": []\n  }\n}\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteJSON(&b, sarifLike{}); err != nil || strings.Contains(b.String(), "schema_version") {
		t.Errorf("a document with its own schema: %v\n%s", err, b.String())
	}
}

func TestTableEscapesForItsMedium(t *testing.T) {
	t.Setenv("COLUMNS", "200")
	tw := NewTable()
	tw.AppendHeader([]any{"name"})
	tw.AppendRow([]any{"a|b \x1b[31mred"})
	var b bytes.Buffer
	Table(&b, tw, Markdown)
	if strings.Contains(b.String(), "\x1b") || !strings.Contains(b.String(), "a&#124;b") {
		t.Errorf("markdown: %q", b.String())
	}
	b.Reset()
	Table(&b, tw, Text)
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("text keeps a terminal control: %q", b.String())
	}
}
