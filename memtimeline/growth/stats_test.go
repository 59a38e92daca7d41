package growth

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// median by selection agrees with the median of a sorted copy.
func TestMedianSelection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 60; n++ {
		for rep := 0; rep < 20; rep++ {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(rng.IntN(7)) // many ties
			}
			s := slices.Sorted(slices.Values(v))
			want := s[n/2]
			if n%2 == 0 {
				want = (s[n/2-1] + s[n/2]) / 2
			}
			if got := median(v); got != want {
				t.Fatalf("median(%v) = %v, want %v", v, got, want)
			}
		}
	}
}

// Mann-Kendall on a strict rise of n points: S = n(n-1)/2; Z for n = 10
// is 3.94 (no ties); a constant series has no trend.
func TestMannKendall(t *testing.T) {
	y := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	s, z := mannKendall(y, 0)
	if s != 45 || z < 3.93 || z > 3.95 {
		t.Errorf("S %d Z %.3f, want 45, 3.94", s, z)
	}
	if s, z := mannKendall([]float64{5, 5, 5, 5, 5}, 0); s != 0 || z != 0 {
		t.Errorf("flat: S %d Z %v", s, z)
	}
	if p := pOneSided(3.09); p < 0.00099 || p > 0.00101 {
		t.Errorf("p(3.09) = %v, want 0.001", p)
	}
}

func TestTrendOf(t *testing.T) {
	p := Default()
	steps := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	up := []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110}
	if tr := TrendOf(steps, up, p); !tr.Grows(p) || tr.Slope != 10 {
		t.Errorf("a line rising 10 a step: %+v", tr)
	}
	flat := []float64{5, 3, 5, 3, 5, 3, 5, 3, 5, 3, 5, 3}
	if tr := TrendOf(steps, flat, p); tr.Grows(p) {
		t.Errorf("a sawtooth with no trend grows: %+v", tr)
	}
}
