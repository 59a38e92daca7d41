package chart

import (
	"compress/gzip"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// The chart's tests read the repository's real inputs (testdata/ at the
// module root, two levels up).

func timelineDir(run string) string {
	return filepath.Join("..", "..", "testdata", "timeline", run)
}

func readGz(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readTrace(t testing.TB, name string) *chrometrace.Trace {
	t.Helper()
	return readTracePath(t, filepath.Join("..", "..", "testdata", "traces", name, "trace.json.gz"))
}

func readTracePath(t testing.TB, path string) *chrometrace.Trace {
	t.Helper()
	in, err := chrometrace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tr, err := chrometrace.Read(in, chrometrace.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// randomSeries is a seeded random walk with spikes (a failure must be
// reproducible).
func randomSeries(n int) memtimeline.Series {
	r := rand.New(rand.NewPCG(1, 2))
	s := memtimeline.Series{Name: "r", T: make([]int64, n), V: make([]int64, n)}
	var t, v int64
	for i := 0; i < n; i++ {
		t += r.Int64N(1000) // equal times allowed, as in real files
		switch r.IntN(4) {
		case 0: // a spike
			v += r.Int64N(1 << 34)
		case 1:
			v -= r.Int64N(1 << 33)
		default:
			v += r.Int64N(1<<20) - 1<<19
		}
		s.T[i], s.V[i] = t, v
	}
	return s
}
