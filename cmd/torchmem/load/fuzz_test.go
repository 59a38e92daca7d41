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
	for i, p := range []string{
		memtest.Testdata("traces", "no_memory", "trace.json.gz"),
		memtest.Testdata("snapshots", "older_schema.pickle.gz"),
		memtest.Testdata("steps", "leak_module_cache.stats_steps.jsonl"),
		memtest.Testdata("summary", "nvidia_smi_leak_memory_summary_000.txt"),
	} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(i), data)
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
