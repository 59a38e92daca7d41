package main

import (
	"io"
	"os"
	"testing"
)

// benchCommand runs a whole command on a real trace; bytes are the
// compressed file's (set TORCHMEM_BENCH_TRACE to measure another file,
// e.g. the tiled 1 GB trace of chrometrace's TestWriteTiledTrace).
// Compare analyze with ops: analyze reads the trace once and computes
// each analysis once, so it should cost little more than ops.
func benchCommand(b *testing.B, cmd string) {
	path := benchTrace(b)
	for b.Loop() {
		if code := run([]string{cmd, path}, io.Discard, io.Discard); code == exitBadInput {
			b.Fatalf("%s exited %d", cmd, code)
		}
	}
}

// benchTrace is the trace the benchmarks read (TORCHMEM_BENCH_TRACE, or
// big_transformer's), its size set as the bytes per operation.
func benchTrace(b *testing.B) string {
	path := os.Getenv("TORCHMEM_BENCH_TRACE")
	if path == "" {
		path = realTrace("big_transformer")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	return path
}

func BenchmarkOps(b *testing.B)     { benchCommand(b, "ops") }
func BenchmarkAnalyze(b *testing.B) { benchCommand(b, "analyze") }

// BenchmarkSummarize is the map step on one trace: read, analyse, write
// its summary (compare with BenchmarkAnalyze: the summary adds the chart's
// holders and the top rows).
func BenchmarkSummarize(b *testing.B) {
	path := benchTrace(b)
	out := b.TempDir()
	for b.Loop() {
		if code := run([]string{"summarize", path, "-o", out}, io.Discard, io.Discard); code != exitOK {
			b.Fatalf("summarize exited %d", code)
		}
	}
}
