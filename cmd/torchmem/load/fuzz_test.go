package load

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// Fuzz budget of the loader: a fixed start (the trace reader's buffers and
// workers) plus a cap per byte of the file as stored (gzip included, so a
// file may decompress a thousandfold: the readers' caps bound that).
const (
	loadAllocBase    = 64 << 20
	loadAllocPerByte = 4096
)

// fuzzNames are the file names the fuzzer's first byte picks from: the
// loader decides a file's kind by its content and its name.
var fuzzNames = []string{"x.json", "x.json.gz", "rank0.pt.trace.json", "x.pickle", "x.pickle.gz", "x.csv", "x.jsonl", "x.log", "x.txt", "x.summary.json.gz", "x.raw.json.gz", "x.html", "x"}

// FuzzLoad feeds arbitrary files to the loader, named on the command line
// (parsed as a trace when unrecognized) and found in a folder (passed over
// when unrecognized), read twice as annotate does: it must return a file,
// skip it or fail, never panic, and allocate at most loadAllocBase plus
// loadAllocPerByte bytes per byte of file. Seeds: small real inputs of
// every kind, and testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	// A small trace of every event kind the reader keeps (the real ones
	// take a third of a second a run, which starves the fuzzer).
	f.Add(byte(0), []byte(`{"deviceProperties":[{"id":0,"name":"H200"}],"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":9},{"ph":"X","cat":"cpu_op","name":"aten::empty","pid":1,"tid":1,"ts":1,"dur":2},{"ph":"X","cat":"python_function","name":"x.py(3): f","pid":1,"tid":1,"ts":1,"dur":3},{"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":2,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":512,"Total Allocated":512,"Total Reserved":2097152}},{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":3,"dur":1}]}`))
	for i, p := range []string{
		memtest.Testdata("snapshots", "older_schema.pickle.gz"),
		memtest.Testdata("steps", "leak_module_cache.stats_steps.jsonl"),
		memtest.Testdata("summary", "nvidia_smi_leak_memory_summary_000.txt"),
	} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(i+3), data)
	}
	f.Add(byte(5), []byte("timestamp, name, index, memory.used [MiB], memory.total [MiB]\n2026/11/30 12:00:00.000, NVIDIA H200, 0, 1000 MiB, 143771 MiB\n"))
	f.Add(byte(9), []byte(`{"format":"torchmem-summary","schema_version":1,"kind":"steps","source":"s","rank":0,"oom_facts":{},"findings":[]}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, pick byte, data []byte) {
		p := filepath.Join(dir, fuzzNames[int(pick)%len(fuzzNames)])
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		used := memtest.Allocated(func() {
			for _, src := range []Source{{Path: p}, {Path: p, Dir: dir}} {
				o := &Options{Fallback: Trace, Parallel: 1, Command: "fuzz"}
				file, skip, err := Read(src, o)
				if err == nil && !skip && file == nil {
					t.Fatal("no file, no error, not skipped")
				}
				if err != nil && file != nil {
					t.Fatal("a file and an error")
				}
			}
		})
		if limit := loadAllocBase + loadAllocPerByte*uint64(len(data)); used > limit {
			t.Fatalf("allocated %d bytes for a file of %d bytes (limit %d)", used, len(data), limit)
		}
	})
}
