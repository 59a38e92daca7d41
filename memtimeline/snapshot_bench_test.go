package memtimeline

import (
	"bytes"
	"runtime"
	"testing"
)

// BenchmarkReadSnapshot decodes the largest real snapshot in testdata
// (frag_small_allocs, 7.2 MB) from memory.
func BenchmarkReadSnapshot(b *testing.B) {
	raw := readTestSnapshot(b, "frag_small_allocs")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	var s *Snapshot
	for b.Loop() {
		var err error
		if s, err = ReadSnapshot(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
	// What one decoded snapshot keeps alive once the decoder's arena is gone.
	b.StopTimer()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	runtime.KeepAlive(s) // s is live up to here, dead below
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(before.HeapAlloc)-int64(after.HeapAlloc))/(1<<20), "MB-live")
}

// BenchmarkDecodePickle isolates the pickle machine from the mapping.
func BenchmarkDecodePickle(b *testing.B) {
	raw := readTestSnapshot(b, "frag_small_allocs")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodePickle(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}
