package chrometrace

import (
	"bytes"
	"path/filepath"
	"testing"
)

// BenchmarkRead parses the largest real trace (big_transformer, 76 MB of
// JSON) from memory; MB/s is of decompressed JSON.
func BenchmarkRead(b *testing.B) {
	data := gunzipFile(b, filepath.Join("..", "testdata", "traces", "big_transformer", "trace.json.gz"))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadGzip includes decompression; MB/s is of decompressed JSON.
func BenchmarkReadGzip(b *testing.B) {
	path := filepath.Join("..", "testdata", "traces", "big_transformer", "trace.json.gz")
	gz := readFile(b, path)
	b.SetBytes(int64(len(gunzipFile(b, path))))
	b.ReportAllocs()
	for b.Loop() {
		in, err := NewInput(bytes.NewReader(gz))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Read(in, ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOperators(b *testing.B) {
	tr := readTestTrace(b, "big_transformer")
	b.ReportAllocs()
	for b.Loop() {
		Operators(tr, OperatorOptions{Device: -1})
	}
}
