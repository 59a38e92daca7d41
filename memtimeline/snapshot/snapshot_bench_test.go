package snapshot

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// BenchmarkReadSnapshot decodes the largest real snapshot in testdata
// (frag_small_allocs, 7.2 MB) from memory.
func BenchmarkReadSnapshot(b *testing.B) {
	raw := memtest.ReadAll(b, memtest.NamedSnapshot("frag_small_allocs"))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	var s *Snapshot
	for b.Loop() {
		var err error
		if s, err = Read(bytes.NewReader(raw)); err != nil {
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

// BenchmarkReadSnapshotFile reads a large snapshot named by
// TORCHMEM_SNAPSHOT (make one with testdata/snapshots/tile_snapshot.py:
// 75 copies of frag_small_allocs' history are 634 MB) from the file, as
// the command does; MB/s is of the pickle, user-s/GB the CPU it took.
func BenchmarkReadSnapshotFile(b *testing.B) {
	path := os.Getenv("TORCHMEM_SNAPSHOT")
	if path == "" {
		b.Skip("set TORCHMEM_SNAPSHOT to a large snapshot pickle")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	n := 0
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Read(bufio.NewReaderSize(f, 1<<20)); err != nil {
			b.Fatal(err)
		}
		f.Close()
		n++
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	gb := float64(st.Size()) * float64(n) / 1e9
	b.ReportMetric(float64(ru1.Utime.Nano()-ru0.Utime.Nano())/1e9/gb, "user-s/GB")
}
