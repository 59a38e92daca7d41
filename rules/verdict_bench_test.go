package rules

import (
	"os"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// BenchmarkVerdict measures the verdict of one large trace (big_transformer,
// 5 MB gzipped): leak evidence, fragmentation, the peak's composition and
// the OOMs, on a fresh input each time (nothing memoized).
func BenchmarkVerdict(b *testing.B) {
	path := memtest.Testdata("traces", "big_transformer", "trace.json.gz")
	st, err := os.Stat(path)
	if err != nil {
		b.Skip(err)
	}
	tr := memtest.Trace(b, path)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for range b.N {
		in := &Input{Source: path, Trace: tr, Rank: -1}
		judgeAll([]*Input{in})
	}
}

// BenchmarkPeakComposition is the composition alone.
func BenchmarkPeakComposition(b *testing.B) {
	path := memtest.Testdata("traces", "big_transformer", "trace.json.gz")
	tr := memtest.Trace(b, path)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		in := &Input{Source: path, Trace: tr, Rank: -1}
		in.Attribution()
		in.Lifetimes(-1)
		b.StartTimer()
		in.PeakComposition()
	}
}
