package memtimeline

import (
	"bytes"
	"testing"
)

// BenchmarkReadSnapshot decodes the largest real snapshot in testdata
// (frag_small_allocs, 7.2 MB) from memory.
func BenchmarkReadSnapshot(b *testing.B) {
	raw := readTestSnapshot(b, "frag_small_allocs")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadSnapshot(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
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
