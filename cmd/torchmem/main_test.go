package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// torchmem runs the command line in-process and returns stdout, stderr and
// the exit code.
//
// Tests that call it may run side by side (t.Parallel) unless they set the
// environment (t.Setenv: COLUMNS), change the working directory or a package
// variable (stdin). Such tests stay sequential, and go test runs them before
// every parallel one. The reader caps (--max-value-bytes, --max-records, ...)
// are options of one command line (chrometrace.Limits), so a test giving
// them may run side by side with others. Browser tests each get a tab of
// the shared browser.
func torchmem(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	restoreGCPercent()
	return out.String(), errb.String(), code
}

// torchmemShared is torchmem for a command line on testdata alone, run
// once per test binary: the tests that check one answer from several
// sides (every command agrees, a folder equals its files, the peak is
// torch's, the goldens) ask for the same evaluation of the same folder,
// and it is made once and shared. Only for read-only recordings under
// testdata/ (a path argument anywhere else fails the test: a file a test
// writes may change between two calls) and callers that change neither
// the environment nor a package variable; the key is the arguments, the
// working directory and COLUMNS, with --format and its value moved right
// after the command (where a command line puts its flags does not change
// what it prints), so that "check --format json DIR" and "check DIR
// --format json" are one evaluation.
func torchmemShared(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if !onTestdata(args) {
		t.Fatalf("torchmemShared %v: only recordings under testdata/ are shared", args)
	}
	if i := slices.Index(args, "--format"); i > 1 && i+1 < len(args) {
		args = slices.Concat(args[:1], args[i:i+2], args[1:i], args[i+2:])
	}
	key := strings.Join(append([]string{wd, os.Getenv("COLUMNS")}, args...), "\x00")
	e, _ := sharedRuns.LoadOrStore(key, &sharedRun{})
	r := e.(*sharedRun)
	r.once.Do(func() {
		var out string
		out, r.errOut, r.code = torchmem(t, args...)
		r.out = squeeze(out)
	})
	return unsqueeze(t, r.out), r.errOut, r.code
}

// squeeze gzips a shared output. The outputs stay for the whole test
// binary (10 MB of JSON by its end), and a command's analysisPhase lowers
// the collector's target for the whole process when the live heap passes
// analysisLargeHeap: with them live beside the inputs of the commands
// running side by side, it did so for a hundred commands of small inputs,
// which then collected garbage every few hundred kilobytes.
func squeeze(s string) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	w.Write([]byte(s)) //nolint:errcheck // a bytes.Buffer takes everything
	w.Close()          //nolint:errcheck
	return b.Bytes()
}

// unsqueeze is squeeze's string.
func unsqueeze(t *testing.T, b []byte) string {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	s, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(s)
}

// onTestdata reports whether every path among args is under testdata/
// (what torchmemShared may share).
func onTestdata(args []string) bool {
	for _, a := range args {
		if _, err := os.Stat(a); err == nil && !strings.HasPrefix(a, "-") {
			if abs, _ := filepath.Abs(a); !strings.Contains(filepath.ToSlash(abs), "/testdata/") {
				return false
			}
		}
	}
	return true
}

// sharedRuns holds torchmemShared's results by key.
var sharedRuns sync.Map // string -> *sharedRun

type sharedRun struct {
	once   sync.Once
	out    []byte // gzipped (squeeze)
	errOut string
	code   int
}

// decodeJSON unmarshals a command's JSON output into v, failing the test
// with the start of the output when it is not JSON.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("not JSON: %v\n%.500s", err, out)
	}
}

// onlyInput is the one document of a per-input command's JSON output
// ({"inputs": [DOC]}: one shape whatever the number of inputs).
func onlyInput(t *testing.T, out string) string {
	t.Helper()
	var doc struct {
		Inputs []json.RawMessage `json:"inputs"`
	}
	decodeJSON(t, out, &doc)
	if len(doc.Inputs) != 1 {
		t.Fatalf("%d documents in inputs, want 1:\n%.500s", len(doc.Inputs), out)
	}
	return string(doc.Inputs[0])
}

// refused checks that the command line exits 2 (bad input or usage) with
// an error that says want.
func refused(t *testing.T, want string, args ...string) {
	t.Helper()
	_, stderr, code := torchmem(t, args...)
	if code != exitBadInput || !strings.Contains(stderr, want) {
		t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", args, code, stderr, want)
	}
}

// restoreGCPercent undoes the command's analysisPhase for the rest of the
// test binary: a command lowers the collector's target to 10% for its
// analyses, which a process of its own gives back on exit; in one test
// process it would stay, and with the small live heaps between tests every
// later test would collect garbage every few hundred kilobytes (half the
// package's CPU time went to the collector).
func restoreGCPercent() { debug.SetGCPercent(startGCPercent) }

// startGCPercent is the test binary's own target (100, or $GOGC).
var startGCPercent = func() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}()

func realTrace(name string) string {
	return memtest.Testdata("traces", name, "trace.json.gz")
}

// checkGolden compares got with the golden file at path, relative to the
// repository root (tests may chdir there), rewriting it with -update.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if _, err := os.Stat("go.mod"); err != nil {
		path = filepath.Join("..", "..", path)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/torchmem -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update and review the diff):\n%s", path, got)
	}
}

func TestOpsTableGolden(t *testing.T) {
	out, errOut, code := torchmem(t, "ops", realTrace("resnet_train_clean"), "--top", "15")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	out = strings.ReplaceAll(out, filepath.ToSlash(realTrace("resnet_train_clean")), "TRACE")
	checkGolden(t, "testdata/cmd/ops_resnet_train_clean.txt", out)
}

func TestOpsJSONShape(t *testing.T) {
	out, _, code := torchmem(t, "ops", realTrace("leak_module_cache"), "--format", "json", "--top", "0")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Summary   map[string]any   `json:"summary"`
		Operators []map[string]any `json:"operators"`
	}
	decodeJSON(t, onlyInput(t, out), &doc)
	if doc.Summary == nil || len(doc.Operators) == 0 {
		t.Fatalf("missing summary or operators: %s", out[:200])
	}
	for _, k := range []string{"name", "calls", "self_device_memory_bytes", "device_memory_bytes", "allocs", "alloc_bytes", "mean_alloc_bytes"} {
		if _, ok := doc.Operators[0][k]; !ok {
			t.Errorf("operator lacks %q", k)
		}
	}
	// Sorted by self memory, largest first; exact integers.
	first, second := doc.Operators[0]["self_device_memory_bytes"].(float64), doc.Operators[1]["self_device_memory_bytes"].(float64)
	if first < second {
		t.Errorf("not sorted: %v then %v", first, second)
	}
	if doc.Summary["peak_allocated_bytes"].(float64) <= 0 {
		t.Error("no peak allocated")
	}
}

func TestOpsFormatsAndFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--format", "csv"}, {"--format", "markdown"}, {"--sort", "allocs"}, {"--sort", "calls"},
		{"--sort", "total"}, {"--group-by", "shape"}, {"--group-by", "stack"}, {"--device", "0"},
	} {
		out, errOut, code := torchmem(t, append([]string{"ops", realTrace("leak_module_cache"), "--top", "5"}, args...)...)
		if code != 0 || errOut != "" || !strings.Contains(out, "aten::") {
			t.Errorf("%v: exit %d stderr %q", args, code, errOut)
		}
	}
	out, _, _ := torchmem(t, "ops", realTrace("leak_module_cache"), "--format", "csv", "--top", "3")
	if !strings.Contains(out, "Self CUDA Mem (bytes)") || strings.Contains(out, " MB") {
		t.Errorf("CSV should carry exact bytes:\n%s", out)
	}
}

func TestOpsNoMemoryTraceSaysHowToRecord(t *testing.T) {
	out, _, code := torchmem(t, "ops", realTrace("no_memory"))
	if code != 0 || !strings.Contains(out, "profile_memory=True") {
		t.Errorf("exit %d, output lacks the hint:\n%s", code, out)
	}
}

func TestBadInputExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string { return memtest.WriteFile(t, dir, name, data) }
	gz, err := os.ReadFile(realTrace("leak_module_cache"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), gz...)
	for i := 200; i < 260; i++ {
		corrupt[i] ^= 0x5A
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"ops", filepath.Join(dir, "nope.json")}, "no such file"},
		{"empty", []string{"ops", write("empty.json", nil)}, "empty"},
		{"not json", []string{"ops", write("x.json", []byte("PK\x03\x04 zip"))}, "not JSON"},
		{"json not trace", []string{"ops", write("y.json", []byte(`{"hello": [1,2]}`))}, "not a Chrome trace"},
		{"corrupt gzip", []string{"ops", write("c.json.gz", corrupt)}, "gzip"},
		{"directory", []string{"ops", dir}, "directory"},
		{"no args", []string{"ops"}, "arg"},
		{"bad sort", []string{"ops", realTrace("leak_module_cache"), "--sort", "x"}, "--sort"},
		{"bad format", []string{"ops", realTrace("leak_module_cache"), "--format", "xml"}, "--format"},
	}
	// Every command that reads inputs opens them one way (the loader):
	// a missing file, an empty one and one of a kind the command does not
	// read give one line naming the file, and exit 2.
	missing, empty := filepath.Join(dir, "missing.json"), write("empty.json", nil)
	stepsLog := memtest.Testdata("steps", "big_transformer.stats_steps.jsonl")
	notAKind := write("hello.json", []byte(`{"hello": [1, 2]}`))
	wrongKind := map[string][2]string{ // command: file, what the error says
		"analyze": {notAKind, "not a file torchmem reads"}, "check": {notAKind, "not a file torchmem reads"},
		"leaks": {notAKind, "not a file torchmem reads"}, "report": {notAKind, "not a file torchmem reads"},
		"annotate": {stepsLog, "this is a per-step memory log"}, "diff": {stepsLog, "this is a per-step memory log"},
		"frag": {stepsLog, "this is a per-step memory log"}, "ops": {stepsLog, "this is a per-step memory log"},
		"smi": {stepsLog, "this is a per-step memory log"}, "snapshot": {stepsLog, "this is a per-step memory log"},
		"stacks":    {stepsLog, "this is a per-step memory log"},
		"steps":     {memtest.Testdata("smi", "nvidia_smi_leak.csv"), "this is an nvidia-smi log"},
		"summarize": {memtest.Testdata("smi", "per_process", "compute_apps_once.csv"), "this is an nvidia-smi per-process log"},
	}
	oneLine := map[string]bool{}
	for cmd, wrong := range wrongKind {
		for _, in := range [][2]string{{missing, "no such file"}, {empty, "file is empty"}, wrong} {
			args := []string{cmd, in[0]}
			switch cmd {
			case "annotate", "report":
				args = append(args, "-o", filepath.Join(dir, "out-"+cmd))
			case "summarize":
				args = append(args, "-o", filepath.Join(dir, "summaries"))
			case "diff":
				args = append(args, realTrace("leak_module_cache"))
			}
			name := cmd + " " + filepath.Base(in[0])
			cases = append(cases, struct {
				name string
				args []string
				want string
			}{name, args, "torchmem: " + in[0] + ": " + in[1]})
			oneLine[name] = true
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := torchmem(t, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(errOut, c.want) || out != "" {
				t.Errorf("stderr %q should say %q; stdout %q", errOut, c.want, out)
			}
			if oneLine[c.name] && (!strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1) {
				t.Errorf("stderr %q: want one line, %q...", errOut, c.want)
			}
			if strings.Contains(errOut, "panic") {
				t.Error(errOut)
			}
		})
	}
}

func TestTruncatedTraceWarnsAndReports(t *testing.T) {
	gz, err := os.ReadFile(realTrace("leak_module_cache"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cut.json.gz")
	if err := os.WriteFile(p, gz[:len(gz)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := torchmem(t, "ops", p)
	if code != 0 || !strings.Contains(errOut, "truncated") || !strings.Contains(out, "aten::") {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
}

func TestVersionAndHelp(t *testing.T) {
	out, _, code := torchmem(t, "--version")
	if code != 0 || !strings.Contains(out, version) {
		t.Errorf("--version: %d %q", code, out)
	}
	out, _, code = torchmem(t, "ops", "--help")
	if code != 0 || !strings.Contains(out, "key_averages") || !strings.Contains(out, "Examples:") {
		t.Errorf("ops --help: %d %q", code, out)
	}
}
