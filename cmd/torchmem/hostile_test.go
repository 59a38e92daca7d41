package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
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
	data := memtest.ReadAll(t, realTrace("leak_module_cache"))
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
	t.Setenv("COLUMNS", "400") // content, not layout: wide enough that no line wraps
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
		{[]string{"stacks", hostile, "--format", "folded"}, false},
		{[]string{"stacks", hostile, "--format", "csv"}, false},
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
	decodeJSON(t, out, &doc)
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

// writeGz writes head + n copies of piece + tail, gzipped, to a temp file:
// a small file that expands n-fold.
func writeGz(t *testing.T, name, head, piece string, n int, tail string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	io.WriteString(zw, head) //nolint:errcheck
	for range n {
		io.WriteString(zw, piece) //nolint:errcheck
	}
	io.WriteString(zw, tail) //nolint:errcheck
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// Past a reader cap a command stops with exit 2 and one message naming
// the file, the cap and the flag that raises it; raising it reads on.
func TestReaderCapsOnTheCommandLine(t *testing.T) {
	spaces := writeGz(t, "spaces.json.gz", "[[", strings.Repeat(" ", 1024), 4096, "0],[[0,0,0,0,0,0,0,0,0]]]")
	zeros := writeGz(t, "zeros.json.gz", "[[", "0,", 100_000, "0],[]]")
	smi := writeGz(t, "smi.csv.gz", "timestamp, index, memory.used [MiB]\n", "2024/01/01 00:00:01.000, 0, 1000 MiB\n", 1000, "")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"analyze", spaces, "--max-input-bytes", "1MiB"}, exitBadInput, "more than 1048576 decompressed bytes"},
		{[]string{"analyze", spaces}, exitOK, ""},
		{[]string{"analyze", zeros, "--max-records", "1000"}, exitBadInput, "more than 1000 timeline points"},
		{[]string{"smi", smi, "--max-records", "100"}, exitBadInput, "more than 800 nvidia-smi rows"},
		{[]string{"smi", smi}, exitOK, ""},
	}
	for _, c := range cases {
		_, errOut, code := torchmem(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
			continue
		}
		if c.want != "" && (!strings.Contains(errOut, c.args[1]) || !strings.Contains(errOut, "--max-")) {
			t.Errorf("%v: %q does not name the file and the flag", c.args, errOut)
		}
	}
}

// -o never overwrites an input, named directly, through another path, or
// as a trace inside an input directory; a new file or an old report is
// written as usual.
func TestOutputNeverOverwritesAnInput(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(realTrace("resnet_train_clean"))
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "x.json.gz")
	if err := os.WriteFile(trace, data, 0o644); err != nil {
		t.Fatal(err)
	}
	oldReport := filepath.Join(dir, "old.html")
	os.WriteFile(oldReport, []byte("<html></html>"), 0o644) //nolint:errcheck
	for _, args := range [][]string{
		{"report", trace, "-o", trace},
		{"report", trace, "-o", filepath.Join(dir, ".", "..", filepath.Base(dir), "x.json.gz")},
		{"report", dir, "-o", trace},
		{"analyze", trace, "-o", trace},
		{"diff", trace, trace, "-o", trace},
	} {
		refused(t, "never overwrites an input", args...)
		if got, _ := os.ReadFile(trace); !bytes.Equal(got, data) {
			t.Fatalf("%v overwrote the input", args)
		}
	}
	for _, out := range []string{filepath.Join(dir, "new.html"), oldReport} {
		if _, errOut, code := torchmem(t, "report", dir, "-o", out); code == exitBadInput {
			t.Errorf("report -o %s: exit 2: %s", out, errOut)
		}
	}
}

// A damaged or cut gzip is named in the error, for every command.
func TestDamagedGzipNamesTheFile(t *testing.T) {
	data, err := os.ReadFile(memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pickle.gz")
	os.WriteFile(cut, data[:len(data)/2], 0o644) //nolint:errcheck
	for _, c := range []string{"snapshot", "frag", "analyze"} {
		refused(t, cut, c, cut)
	}
}

// The cases for inputs that can be read once: frag on a FIFO
// (it hung, opening the FIFO twice) and analyze <(cat t.json), a
// /dev/fd/N pipe ("not JSON": the sniffed bytes were gone).
func TestReadOnceInputs(t *testing.T) {
	t.Parallel() // see torchmem: which tests may run side by side
	gz, err := os.ReadFile(realTrace("frag_small_allocs"))
	if err != nil {
		t.Fatal(err)
	}
	plain := memtest.ReadAll(t, realTrace("frag_small_allocs"))
	feed := func(w io.WriteCloser, data []byte) {
		w.Write(data) //nolint:errcheck
		w.Close()
	}
	fifo := filepath.Join(t.TempDir(), "trace.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	go func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			feed(w, gz)
		}
	}()
	out, errOut, code := torchmem(t, "frag", fifo)
	if code != exitOK || !strings.Contains(out, "Verdict: OK") || !strings.Contains(out, "3301 allocations of <= 4.00 KB per step") {
		t.Errorf("frag FIFO: exit %d, %q\n%s", code, errOut, out)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go feed(w, plain)
	out, errOut, code = torchmem(t, "analyze", fmt.Sprintf("/dev/fd/%d", r.Fd()))
	if code == exitBadInput || !strings.Contains(out, "Findings") {
		t.Errorf("analyze /dev/fd/N: exit %d, %q\n%s", code, errOut, out)
	}
}

// snapshot printed a frame's file name raw: one holding ESC ]0; (set the
// window title) and ESC [2J (clear the screen) reaches the terminal as
// visible escapes, in every format, and JSON keeps the name exactly.
func TestHostileSnapshotNames(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "memtimeline", "snapshot", "testdata", "pickle", "snapshot_p4.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	const name = "/\x1b]0;P\a\x1b[2J`<.py" // as long as /home/u/train.py: the pickle stays valid
	p := filepath.Join(t.TempDir(), "hostile.pickle")
	os.WriteFile(p, bytes.Replace(data, []byte("/home/u/train.py"), []byte(name), 1), 0o644) //nolint:errcheck
	for _, format := range []string{"table", "json"} {
		out, errOut, code := torchmem(t, "snapshot", p, "--format", format)
		if code == exitBadInput {
			t.Fatalf("%s: exit 2: %s", format, errOut)
		}
		if strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("%s: raw control characters in\n%s", format, out)
		}
		if format == "table" && !strings.Contains(out, `\x1b]0;P\x07\x1b[2J`) {
			t.Errorf("table: the name is not shown escaped:\n%s", out)
		}
		if format == "json" && !strings.Contains(out, `\u001b]0;P\u0007\u001b[2J`) {
			t.Errorf("json: the name is not kept:\n%s", out)
		}
	}
}
