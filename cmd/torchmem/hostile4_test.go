package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The second round of hostile inputs (issue 43; ../shared/hostile/round4.sh
// reproduces them against a binary). Each input is made here.

func runOut(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// exampleDigest summarizes the bundled example trace and returns its
// summary as a JSON object.
func exampleDigest(t *testing.T) map[string]any {
	t.Helper()
	dir := t.TempDir()
	if _, stderr, code := runOut(t, "summarize", "-o", dir, realTrace("leak_module_cache")); code != 0 {
		t.Fatalf("summarize: exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.summary.json.gz"))
	if len(files) != 1 {
		t.Fatalf("summaries: %v", files)
	}
	var d map[string]any
	if err := json.Unmarshal(memtest.ReadAll(t, files[0]), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeGzFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data) //nolint:errcheck
	zw.Close()     //nolint:errcheck
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHostileDigests: a summary without its optional-looking but always
// written parts crashed report, analyze -o and diff (exit 2, the code of
// bad input), and check said PASS on a 64-byte one. Each is now refused as
// not a summary torchmem wrote (exit 2, naming what is missing), and
// nothing passes a gate; a million empty charts in 3 KB are refused
// before they are built.
func TestHostileDigests(t *testing.T) {
	d := exampleDigest(t)
	without := func(key string) string {
		c := map[string]any{}
		for k, v := range d {
			if k != key && k != "format" {
				c[k] = v
			}
		}
		b, _ := json.Marshal(c)
		// "format" first: that is how the loader knows a summary.
		b = append([]byte(`{"format":"torchmem-summary",`), b[1:]...)
		return writeGzFile(t, "no_"+key+".summary.json.gz", b)
	}
	tiny := writeGzFile(t, "tiny.summary.json.gz", []byte(`{"format":"torchmem-summary","schema_version":1,"kind":"trace"}`))
	charts := writeGzFile(t, "charts.summary.json.gz", []byte(`{"format":"torchmem-summary","schema_version":1,"kind":"trace","charts":[`+strings.Repeat("{},", 999999)+`{}]}`))
	html := filepath.Join(t.TempDir(), "r.html")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"report", "-o", html, without("trace_summary")}, "without trace_summary"},
		{[]string{"analyze", "-o", html, without("trace_summary")}, "without trace_summary"},
		{[]string{"diff", without("diff_side"), without("diff_side")}, "without diff_side"},
		{[]string{"report", "-o", html, tiny}, "without oom_facts, leaks"},
		{[]string{"check", tiny}, "without oom_facts, leaks"},
		{[]string{"leaks", charts}, "JSON objects and arrays"},
	}
	for _, c := range cases {
		stdout, stderr, code := runOut(t, c.args...)
		if code != exitBadInput || !strings.Contains(stderr, c.want) || strings.Contains(stdout+stderr, "PASS") || strings.Contains(stderr, "bug in torchmem") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 saying %q", c.args[0], code, stderr, stdout, c.want)
		}
	}
}

// TestPanicIsABug: a panic anywhere in a command is a bug in torchmem, not
// bad input: exit 3 (2 is bad input), the file named, the stack printed.
func TestPanicIsABug(t *testing.T) {
	bugHook = func([]string) { var m map[string]int; m["x"]++ }
	defer func() { bugHook = nil }()
	_, stderr, code := runOut(t, "analyze", "some.trace.json")
	if code != exitBug || !strings.Contains(stderr, "bug in torchmem while reading some.trace.json: assignment to entry in nil map") || !strings.Contains(stderr, "goroutine") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestNamesStayOnOneLine: a newline in a GPU name or a file name started
// a line of its own in text output (a file named "x\n[PASS] memory.leak:
// no leak.json.gz" planted a PASS line in check's output).
func TestNamesStayOnOneLine(t *testing.T) {
	var tr map[string]any
	if err := json.Unmarshal(memtest.ReadAll(t, realTrace("leak_module_cache")), &tr); err != nil {
		t.Fatal(err)
	}
	tr["deviceProperties"].([]any)[0].(map[string]any)["name"] = "H200\nCLEAN: no leak, all checks passed"
	b, _ := json.Marshal(tr)
	gpu := writeGzFile(t, "gpu.trace.json.gz", b)
	stdout, _, _ := runOut(t, "ops", gpu)
	if strings.Contains(stdout, "\nCLEAN:") || !strings.Contains(stdout, `H200\nCLEAN`) {
		t.Errorf("ops: the GPU name starts a line:\n%s", stdout)
	}
	name := filepath.Join(t.TempDir(), "x\n[PASS] memory.leak: no leak.json.gz")
	if err := os.WriteFile(name, memtest.ReadAll(t, realTrace("leak_module_cache")), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runOut(t, "check", "--", name)
	if code != exitFindings || strings.Contains(stdout, "\n[PASS] memory.leak") || !strings.Contains(stdout, `x\n[PASS] memory.leak: no leak.json.gz`) {
		t.Errorf("check: exit %d, a PASS line planted by the file name:\n%s", code, stdout)
	}
}

// TestNoLiveLinksFromNames: a URL in a function name became a live link in
// Markdown (GitHub autolinks), "[text](url)" passed into SARIF
// message.text, and frag --format markdown on a snapshot wrote its text
// report with the file name's raw HTML.
func TestNoLiveLinksFromNames(t *testing.T) {
	data := memtest.ReadAll(t, realTrace("leak_module_cache"))
	data = bytes.ReplaceAll(data, []byte(`gen_traces.py(143): forward`), []byte(`gen_traces.py(143): forward https://evil.example/x [click](https://evil.example/y) www.evil.example`))
	p := filepath.Join(t.TempDir(), "links.trace.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	md, _, _ := runOut(t, "analyze", "--format", "markdown", p)
	if !strings.Contains(md, "forward https") {
		t.Fatal("the renamed frame is not in the Markdown")
	}
	html := renderMarkdown(t, md)
	if strings.Contains(html, "evil.example/x\"") || strings.Contains(html, `href="https://evil`) || strings.Contains(md, "https://evil") || strings.Contains(md, " www.evil") {
		t.Errorf("a live link in the Markdown:\n%s", md)
	}
	sarif, _, _ := runOut(t, "check", "--format", "sarif", p)
	if strings.Contains(sarif, "[click](") || strings.Contains(sarif, "https://evil") || !strings.Contains(sarif, `\\[click\\]`) {
		t.Errorf("SARIF message.text carries a link:\n%s", sarif)
	}

	snap := filepath.Join(t.TempDir(), "s\n<img src=x onerror=alert(9)>\n.pickle.gz")
	raw, err := os.ReadFile(memtest.Testdata("snapshots", "frag_small_allocs.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	md, _, _ = runOut(t, "frag", "--format", "markdown", "--", snap)
	if strings.Contains(md, "<img") || !strings.HasPrefix(md, "### ") || !strings.Contains(md, "**Verdict: ") || !strings.Contains(md, "```text") {
		t.Errorf("frag --format markdown on a snapshot:\n%s", md)
	}
}

// TestFIFOsDoNotBlock: a FIFO in an input folder blocked analyze forever,
// as did a FIFO given to annotate (it reads the trace twice).
func TestFIFOsDoNotBlock(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "x.json"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t.trace.json.gz"), mustRead(t, realTrace("leak_module_cache")), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 2)
	go func() { _, e, c := runOut(t, "analyze", dir); done <- result{e, c} }()
	go func() {
		_, e, c := runOut(t, "annotate", filepath.Join(dir, "x.json"), "-o", filepath.Join(t.TempDir(), "out.json"))
		done <- result{e, c}
	}()
	for range 2 {
		select {
		case r := <-done:
			switch {
			case strings.Contains(r.stderr, "annotate reads the trace twice"):
				if r.code != exitBadInput {
					t.Errorf("annotate of a FIFO: exit %d", r.code)
				}
			case r.code != exitFindings || !strings.Contains(r.stderr, "skipping 1 file not regular") || !strings.Contains(r.stderr, "x.json"):
				t.Errorf("analyze of a folder with a FIFO: exit %d, stderr %q", r.code, r.stderr)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("blocked on a FIFO for 60 s")
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
