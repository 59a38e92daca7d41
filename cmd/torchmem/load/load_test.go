package load

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/torchmem/torchmem/chrometrace/bombtest"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// head returns the decompressed start of a file, as Open sniffs it.
func head(t *testing.T, path string) []byte {
	t.Helper()
	r, err := Open(path, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, _ := r.Peek(SniffBytes)
	return h
}

// Every real input in testdata is recognized by content, and the JSON
// files that sit next to them (oracles, truth, memory_stats) are not
// mistaken for traces.
func TestSniffRealFiles(t *testing.T) {
	cases := []struct {
		path string
		want Kind
	}{
		{memtest.Testdata("traces", "resnet_train_clean", "trace.json.gz"), Trace},
		{memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"), Trace},
		{memtest.Testdata("gpu", "leak_retain_graph", "snapshot.pickle"), Snapshot},
		{memtest.Testdata("snapshots", "leak_module_cache.pickle.gz"), Snapshot},
		{memtest.Testdata("gpu", "leak_retain_graph", "memory_timeline.raw.json.gz"), Timeline},
		{memtest.Testdata("gpu", "leak_retain_graph", "stats_steps.jsonl"), Steps},
		{memtest.Testdata("gpu", "snippet_proof", "gpu", "vm_rank0.steps.jsonl"), Steps},
		{memtest.Testdata("smi", "nvidia_smi_leak.csv"), SMI},
		{memtest.Testdata("gpu", "leak_retain_graph", "key_averages.json"), Unknown},
		{memtest.Testdata("gpu", "leak_retain_graph", "memory_stats.json"), Unknown},
		{memtest.Testdata("gpu", "leak_retain_graph", "truth.json"), Unknown},
		{memtest.Testdata("gpu", "leak_retain_graph", "table.txt"), Unknown},
		{memtest.Testdata("gpu", "README.md"), Unknown},
	}
	for _, c := range cases {
		if got := Sniff(head(t, c.path)); got != c.want {
			t.Errorf("%s: %s, want %s", c.path, got, c.want)
		}
	}
}

func TestSniffSynthetic(t *testing.T) {
	cases := []struct {
		in   string
		want Kind
	}{
		{`{"traceEvents": []}`, Trace},
		{`{"schemaVersion": 1, "deviceProperties": [`, Trace}, // head ends before traceEvents
		{`{"displayTimeUnit": "ns", "traceEvents": [{"ph": "X"}]}`, Trace},
		{`[{"name": "aten::mm", "ph": "X", "ts": 1}]`, Trace}, // legacy bare array
		{`[]`, Trace},
		{`{"hello": 1}`, Unknown},
		{`{"lr": 0.1, "epochs": 3}`, Unknown},
		{`[{"key": "aten::mm", "count": 6}]`, Unknown},
		{`[[1, 2], [[3]]]`, Timeline},
		{"\x80\x04K\x01.", Snapshot},
		{"index, timestamp, memory.used [MiB]\n0, 2026/11/29 17:26:22.516, 5 MiB\n", SMI},
		{"pid, process_name, used_gpu_memory [MiB]\n4242, python3, 812 MiB\n", SMIApps},
		{"used_memory, gpu_uuid, pid\n", SMIApps},             // any order, no process yet
		{"timestamp, pid, process_name, gpu_uuid\n", Unknown}, // no memory column
		{"4242, python3, 812 MiB\n", Unknown},                 // no header: cannot be told from a GPU log
		{`{"step": 0, "allocated": 5}` + "\n", Steps},
		{"2026-11-30 12:00:01 INFO rank0: |                  PyTorch CUDA memory summary, device ID 0                 |\n", Summary},
		{"PK\x03\x04 zip", Unknown},
		{"", Unknown},
	}
	for _, c := range cases {
		if got := Sniff([]byte(c.in)); got != c.want {
			t.Errorf("Sniff(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// snippetDir is a user's run directory (memtest.RunDir) with a broken
// gzip added.
func snippetDir(t *testing.T) string {
	t.Helper()
	dir := memtest.RunDir(t)
	if err := os.WriteFile(filepath.Join(dir, "broken.json.gz"), []byte("\x1f\x8b\x08garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadDirectory(t *testing.T) {
	dir := snippetDir(t)
	cases := []struct {
		kinds []Kind
		want  map[Kind]int
	}{
		{nil, map[Kind]int{Trace: 2, Snapshot: 1, Steps: 1}},
		{[]Kind{Trace}, map[Kind]int{Trace: 2}},
		{[]Kind{Snapshot}, map[Kind]int{Snapshot: 1}},
		{[]Kind{Steps}, map[Kind]int{Steps: 1}},
		{[]Kind{Trace, Snapshot}, map[Kind]int{Trace: 2, Snapshot: 1}},
	}
	for _, c := range cases {
		var warnings []string
		files, err := Load([]string{dir}, Options{Kinds: c.kinds, Warn: func(m string) { warnings = append(warnings, m) }})
		if err != nil {
			t.Fatalf("%v: %v", c.kinds, err)
		}
		got := map[Kind]int{}
		for _, f := range files {
			got[f.Kind]++
			if f.Rank != 0 {
				t.Errorf("%s: rank %d, want 0 (vm_rank0...)", f.Path, f.Rank)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%v: loaded %v, want %v", c.kinds, got, c.want)
		}
		for k, n := range c.want {
			if got[k] != n {
				t.Errorf("%v: loaded %v, want %v", c.kinds, got, c.want)
			}
		}
		// One warning per unreadable file, naming it, and one line naming
		// every file of no kind torchmem reads.
		if len(warnings) != 2 || !strings.HasPrefix(warnings[1], "skipping 2 files torchmem does not read: ") {
			t.Errorf("%v: warnings %q", c.kinds, warnings)
		}
		for _, name := range []string{"config.json", "truth.json", "broken.json.gz"} {
			if !strings.Contains(strings.Join(warnings, "\n"), filepath.Join(dir, name)) {
				t.Errorf("no warning names %s: %q", name, warnings)
			}
		}
	}
	// Nothing of the wanted kind: an error naming the directory.
	_, err := Load([]string{dir}, Options{Kinds: []Kind{SMI}})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "no nvidia-smi log") {
		t.Errorf("no smi log: %v", err)
	}
}

// A bad file named on the command line is an error; in a directory it is
// only skipped.
func TestLoadNamedFiles(t *testing.T) {
	dir := snippetDir(t)
	cases := []struct {
		name     string
		opts     Options
		wantErr  string
		wantKind Kind
	}{
		{"config.json", Options{}, "config.json: not a file torchmem reads", ""},
		{"config.json", Options{Kinds: []Kind{Trace}, Fallback: Trace}, "config.json: not a Chrome trace", ""},
		{"broken.json.gz", Options{}, "broken.json.gz: corrupt gzip", ""},
		{"vm_rank0.snapshot.pickle", Options{Kinds: []Kind{Trace}, Fallback: Trace, Command: "ops"}, "vm_rank0.snapshot.pickle: this is an allocator snapshot; ops reads a Kineto trace", ""},
		{"missing.json", Options{}, "missing.json: no such file", ""},
		{"vm_rank0.snapshot.pickle", Options{}, "", Snapshot},
	}
	for _, c := range cases {
		files, err := Load([]string{filepath.Join(dir, c.name)}, c.opts)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		case c.wantErr == "" && (err != nil || len(files) != 1 || files[0].Kind != c.wantKind):
			t.Errorf("%s: %v %v", c.name, files, err)
		}
		var le *Error
		if err != nil && !errors.As(err, &le) {
			t.Errorf("%s: error %T is not a *load.Error", c.name, err)
		}
	}
}

// "-" reads stdin, gzipped or not; it is read once, never reopened.
func TestLoadStdin(t *testing.T) {
	gz, err := os.ReadFile(memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	plain := memtest.ReadAll(t, memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"))
	for name, data := range map[string][]byte{"gzipped": gz, "plain": plain} {
		files, err := Load([]string{Stdin}, Options{Stdin: bytes.NewReader(data)})
		if err != nil || len(files) != 1 || files[0].Trace == nil || len(files[0].Trace.Memory) == 0 {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := Load([]string{Stdin, Stdin}, Options{Stdin: bytes.NewReader(gz)}); err == nil {
		t.Error("stdin twice: no error")
	}
	_, err = Load([]string{Stdin}, Options{Stdin: strings.NewReader("")})
	if err == nil || !strings.Contains(err.Error(), "stdin: file is empty") {
		t.Errorf("empty stdin: %v", err)
	}
}

// A FIFO can be read only once: the sniffed bytes must be the ones parsed.
func TestLoadFIFO(t *testing.T) {
	gz, err := os.ReadFile(memtest.Testdata("gpu", "leak_retain_graph", "trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "trace.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.Write(gz)
		w.Close()
	}()
	files, err := Load([]string{fifo}, Options{})
	if err != nil || len(files) != 1 || files[0].Trace == nil || len(files[0].Trace.Memory) == 0 {
		t.Fatalf("FIFO: %v", err)
	}
}

// Directories expand recursively (per-rank subdirectories), a few levels
// deep, hidden entries left out.
func TestExpand(t *testing.T) {
	srcs, err := Expand([]string{memtest.Testdata("gpu", "ddp_one_rank_leaks")})
	if err != nil {
		t.Fatal(err)
	}
	var traces int
	for _, s := range srcs {
		if s.Named() {
			t.Errorf("%s counted as named", s.Path)
		}
		if strings.HasSuffix(s.Path, "trace.json.gz") {
			traces++
		}
	}
	if traces != 2 {
		t.Errorf("found %d traces in rank0/ and rank1/", traces)
	}
}

// TestTracesReadAtOnceShareWorkers: traces read at once share the CPUs'
// decoding workers rather than each taking as many as a trace alone
// would, whose batches in flight then added up (8 copies of
// big_transformer, analyze under GOMAXPROCS 16: 359 MiB peak RSS with 8
// workers each, 235 MiB sharing). The peak heap with the default is compared with
// the same read forcing 8 workers per trace, the count before sharing.
func TestTracesReadAtOnceShareWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 600 MB of JSON")
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "traces", "big_transformer", "trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank%d.trace.json.gz", i)), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	peak := func(workers int) uint64 {
		o := Options{Kinds: []Kind{Trace}, Reduce: func(*File) (*File, error) { return &File{Kind: Trace}, nil }}
		o.Trace.Workers = workers
		return bombtest.PeakHeap(func() {
			files, err := Load([]string{dir}, o)
			if err != nil || len(files) != 8 {
				t.Fatalf("%d files, %v", len(files), err)
			}
		})
	}
	forced, shared := peak(8), peak(0)
	t.Logf("peak heap: %d MB with 8 workers per trace, %d MB sharing", forced>>20, shared>>20)
	if shared > forced*4/5 {
		t.Errorf("peak heap %d MB sharing the workers, want well under the %d MB of 8 per trace", shared>>20, forced>>20)
	}
}
