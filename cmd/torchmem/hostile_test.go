package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"
)

// attackerTrace is a real leaking trace whose user file and leaking
// operator are renamed to strings an attacker would choose: terminal
// control sequences (set the title, clear the screen), a backtick that
// closes a code span, HTML, a Markdown link and table pipes.
func attackerTrace(t *testing.T) string {
	t.Helper()
	f, err := os.Open(realTrace("leak_module_cache"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	const file = "ev`il|<img src=x onerror=alert(1)>[l](https://evil.example)\\u001b]0;PWNED\\u0007\\u001b[2J\\u202e.py"
	const op = "aten::clone\\u001b[31m` <b>bold</b> | [y](https://evil.example)"
	data = bytes.ReplaceAll(data, []byte("gen_traces.py("), []byte(file+"("))
	data = bytes.ReplaceAll(data, []byte(`"aten::clone"`), []byte(`"`+op+`"`))
	data = bytes.ReplaceAll(data, []byte(`"aten::mm"`), []byte(`"`+strings.Replace(op, "clone", "mm", 1)+`"`))
	if !json.Valid(data) {
		t.Fatal("hostile trace is not JSON")
	}
	p := filepath.Join(t.TempDir(), "hostile.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderMarkdown renders Markdown as GitHub does, raw HTML included, so
// that injected HTML shows up as tags.
func renderMarkdown(t *testing.T, src string) string {
	t.Helper()
	var out bytes.Buffer
	md := goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough),
		goldmark.WithRendererOptions(html.WithUnsafe()))
	if err := md.Convert([]byte(src), &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestHostileNamesEscapedEverywhere(t *testing.T) {
	hostile := attackerTrace(t)
	for _, tc := range []struct {
		args     []string
		markdown bool
	}{
		{[]string{"ops", hostile}, false},
		{[]string{"ops", hostile, "--format", "csv"}, false},
		{[]string{"ops", hostile, "--format", "markdown"}, true},
		{[]string{"stacks", hostile}, false},
		{[]string{"stacks", hostile, "--format", "markdown"}, true},
		{[]string{"leaks", hostile}, false},
		{[]string{"leaks", hostile, "--format", "markdown"}, true},
		{[]string{"analyze", hostile}, false},
		{[]string{"analyze", hostile, "--format", "markdown"}, true},
		{[]string{"analyze", hostile, "--format", "json"}, false},
		{[]string{"check", hostile}, false},
		{[]string{"check", hostile, "--format", "markdown"}, true},
		{[]string{"check", hostile, "--format", "sarif"}, false},
		{[]string{"frag", hostile}, false},
		{[]string{"frag", hostile, "--format", "markdown"}, true},
		{[]string{"diff", realTrace("leak_module_cache"), hostile}, false},
		{[]string{"diff", realTrace("leak_module_cache"), hostile, "--format", "markdown"}, true},
	} {
		name := strings.Join(tc.args[:1], " ") + " " + strings.Join(tc.args[2:], " ")
		out, errOut, code := torchmem(t, tc.args...)
		if code == exitBadInput {
			t.Errorf("%s: exit 2: %s", name, errOut)
			continue
		}
		if !strings.Contains(out, "evil.example") {
			t.Errorf("%s: the hostile names are not in the output at all:\n%s", name, out)
		}
		for _, c := range []string{"\x1b", "\a", "\u202e", "\r"} {
			if strings.Contains(out+errOut, c) {
				t.Errorf("%s: output holds a raw %q", name, c)
			}
		}
		if !tc.markdown {
			continue
		}
		h := renderMarkdown(t, out)
		for _, bad := range []string{"<img", "<b>", "<a ", "raw HTML omitted"} {
			if strings.Contains(h, bad) {
				t.Errorf("%s: the Markdown renders %q:\n%s", name, bad, h)
			}
		}
	}
}

func TestHostileSARIFURIs(t *testing.T) {
	out, _, _ := torchmem(t, "check", attackerTrace(t), "--format", "sarif")
	var doc struct {
		Runs []struct {
			Results []struct {
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct {
							URI string `json:"uri"`
						} `json:"artifactLocation"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range doc.Runs {
		for _, res := range r.Results {
			for _, l := range res.Locations {
				uri := l.PhysicalLocation.ArtifactLocation.URI
				n++
				if strings.ContainsAny(uri, " `|<>[]()\x1b\\") || strings.Contains(uri, "\u202e") {
					t.Errorf("URI %q is not percent-encoded", uri)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no SARIF locations")
	}
}
