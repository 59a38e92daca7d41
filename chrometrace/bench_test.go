package chrometrace

import (
	"bytes"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// benchCPU runs the benchmark loop and reports the CPU time it took per
// operation and per GB of input (user-s/GB), which unlike ns/op does not
// depend on how busy the machine is.
func benchCPU(b *testing.B, bytesPerOp int64, body func()) {
	b.SetBytes(bytesPerOp)
	b.ReportAllocs()
	u0, s0 := cpuTime()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	u1, s1 := cpuTime()
	gb := float64(bytesPerOp) * float64(n) / 1e9
	b.ReportMetric((u1-u0).Seconds()/gb, "user-s/GB")
	b.ReportMetric((s1-s0).Seconds()/gb, "sys-s/GB")
}

// BenchmarkRead parses the largest real trace (big_transformer, 76 MB of
// JSON) from memory; MB/s is of decompressed JSON.
func BenchmarkRead(b *testing.B) {
	data := gunzipFile(b, filepath.Join("..", "testdata", "traces", "big_transformer", "trace.json.gz"))
	benchCPU(b, int64(len(data)), func() {
		if _, err := Read(bytes.NewReader(data), ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkReadSonic is BenchmarkRead with every batch decoded by sonic
// (fastDecode off), the reference fastDecode is measured against.
func BenchmarkReadSonic(b *testing.B) {
	defer func(old bool) { useFastDecode = old }(useFastDecode)
	useFastDecode = false
	BenchmarkRead(b)
}

// BenchmarkReadGzip includes decompression; MB/s is of decompressed JSON.
func BenchmarkReadGzip(b *testing.B) {
	path := filepath.Join("..", "testdata", "traces", "big_transformer", "trace.json.gz")
	gz := readFile(b, path)
	benchCPU(b, int64(len(gunzipFile(b, path))), func() {
		in, err := NewInput(bytes.NewReader(gz))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Read(in, ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkOperators(b *testing.B) {
	tr := readTestTrace(b, "big_transformer")
	b.ReportAllocs()
	for b.Loop() {
		Operators(tr, OperatorOptions{Device: -1})
	}
}

// BenchmarkFastDecode decodes big_transformer's events in 1 MB batches with
// fastDecode alone (no model building); BenchmarkSonicDecode is the same
// with sonic.
func BenchmarkFastDecode(b *testing.B) {
	var ev rawEvent
	n := 0
	benchDecode(b, func(batch []byte, evs []rawEvent) []rawEvent {
		if !fastDecode(batch, &ev, func(*rawEvent) bool { n++; return true }) {
			b.Fatal("fastDecode gave up")
		}
		return evs
	})
}

func BenchmarkSonicDecode(b *testing.B) {
	benchDecode(b, func(batch []byte, evs []rawEvent) []rawEvent {
		if err := sonicValidating.UnmarshalFromString(unsafeString(batch), &evs); err != nil {
			b.Fatal(err)
		}
		return evs
	})
}

func benchDecode(b *testing.B, decode func([]byte, []rawEvent) []rawEvent) {
	data := gunzipFile(b, filepath.Join("..", "testdata", "traces", "big_transformer", "trace.json.gz"))
	open := bytes.Index(data, []byte(`"traceEvents"`))
	rest := data[open+bytes.IndexByte(data[open:], '[')+1:]
	var batches [][]byte
	total := 0
	for len(rest) > 1<<20 {
		cut, next, _ := lastElementBoundary(rest[:1<<20])
		batches = append(batches, append(append([]byte{'['}, rest[:cut]...), ']'))
		total += next
		rest = rest[next:]
	}
	var evs []rawEvent
	benchCPU(b, int64(total), func() {
		for _, bt := range batches {
			evs = decode(bt, evs[:0])
			clear(evs)
		}
	})
}
