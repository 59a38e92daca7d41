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
	for b.Loop() {
		if code := run([]string{cmd, path}, io.Discard, io.Discard); code == exitBadInput {
			b.Fatalf("%s exited %d", cmd, code)
		}
	}
}

func BenchmarkOps(b *testing.B)     { benchCommand(b, "ops") }
func BenchmarkAnalyze(b *testing.B) { benchCommand(b, "analyze") }

// BenchmarkSummarize is the map step on one trace: read, analyse, write
// its summary (compare with BenchmarkAnalyze: the summary adds the chart's
// holders and the top rows).
func BenchmarkSummarize(b *testing.B) {
	path := os.Getenv("TORCHMEM_BENCH_TRACE")
	if path == "" {
		path = realTrace("big_transformer")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	b.SetBytes(st.Size())
	b.ReportAllocs()
	for b.Loop() {
		if code := run([]string{"summarize", path, "-o", out}, io.Discard, io.Discard); code != exitOK {
			b.Fatalf("summarize exited %d", code)
		}
	}
}
