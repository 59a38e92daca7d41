package memtimeline

import (
	"testing"
	"testing/quick"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// checkDownsampled verifies every promise Downsample makes about out.
func checkDownsampled(t *testing.T, in, out Series, maxPoints int) {
	t.Helper()
	limit := max(maxPoints, minDownsamplePoints)
	if len(in.V) <= limit {
		if len(out.V) != len(in.V) {
			t.Fatalf("series of %d points that fits in %d was changed to %d", len(in.V), limit, len(out.V))
		}
		return
	}
	if len(out.T) != len(out.V) {
		t.Fatalf("T has %d points, V %d", len(out.T), len(out.V))
	}
	if len(out.V) > limit {
		t.Fatalf("%d points, more than the limit %d", len(out.V), limit)
	}
	if out.T[0] != in.T[0] || out.V[0] != in.V[0] {
		t.Fatalf("first point not kept")
	}
	last := len(in.V) - 1
	if out.T[len(out.T)-1] != in.T[last] || out.V[len(out.V)-1] != in.V[last] {
		t.Fatalf("last point not kept")
	}
	_, inMax, _ := in.Max()
	_, outMax, _ := out.Max()
	_, inMin, _ := in.Min()
	_, outMin, _ := out.Min()
	if inMax != outMax {
		t.Fatalf("max %d, input max %d", outMax, inMax)
	}
	if inMin != outMin {
		t.Fatalf("min %d, input min %d", outMin, inMin)
	}
	// Every kept point is an input point, in time order, no duplicates.
	j := 0
	for i := range out.T {
		for j < len(in.T) && (in.T[j] != out.T[i] || in.V[j] != out.V[i]) {
			j++
		}
		if j == len(in.T) {
			t.Fatalf("point %d (%d, %d) is not an input point in order", i, out.T[i], out.V[i])
		}
		j++
	}
}

func TestDownsampleKeepsExtremesOnRandomSeries(t *testing.T) {
	r := memtest.NewRand()
	for trial := 0; trial < 2000; trial++ {
		n := r.IntN(3000)
		maxPoints := r.IntN(400) - 10 // includes nonsense limits <= 0
		in := Series{Name: "r"}
		in.T, in.V = memtest.RandomWalk(r, n)
		checkDownsampled(t, in, Downsample(in, maxPoints), maxPoints)
	}
}

// TestDownsampleQuick is the same property driven by testing/quick's own
// generator (arbitrary values, including extremes of int64).
func TestDownsampleQuick(t *testing.T) {
	prop := func(vals []int64, maxPoints uint8) bool {
		in := Series{T: make([]int64, len(vals)), V: vals}
		for i := range in.T {
			in.T[i] = int64(i)
		}
		out := Downsample(in, int(maxPoints))
		_, inMax, okIn := in.Max()
		_, outMax, okOut := out.Max()
		_, inMin, _ := in.Min()
		_, outMin, _ := out.Min()
		if okIn != okOut || inMax != outMax || inMin != outMin {
			return false
		}
		return len(out.V) <= max(int(maxPoints), minDownsamplePoints) || len(out.V) == len(in.V)
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 3000}); err != nil {
		t.Fatal(err)
	}
}

func TestDownsampleSinglePeakInTheMiddle(t *testing.T) {
	// A flat series with one spike: equal-count buckets must still find it.
	n := 100000
	in := Series{T: make([]int64, n), V: make([]int64, n)}
	for i := range in.T {
		in.T[i] = int64(i) * 1000
		in.V[i] = 1 << 30
	}
	in.V[54321] = 5 << 30
	in.V[777] = 1 << 20
	out := Downsample(in, 50)
	checkDownsampled(t, in, out, 50)
}
