package growth

import (
	"math"
	"slices"
)

// Robust statistics over short series (tens to a few hundred points):
// medians, the median absolute deviation, Theil-Sen slopes and the
// Mann-Kendall trend test with the tie-corrected variance. Plain Go: the
// model needs a median, a sort and math.Erfc, all in the standard library
// (gonum would add a dependency for three functions).

// median of v (v is not modified); 0 for an empty slice.
func median(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return 0
	}
	s := slices.Clone(v)
	if n%2 == 1 {
		return nth(s, n/2)
	}
	hi := nth(s, n/2)
	return (slices.Max(s[:n/2]) + hi) / 2 // nth leaves the smaller half first
}

// nth returns the k-th smallest of s (Hoare's selection), reordering s so
// that s[:k] holds values <= it.
func nth(s []float64, k int) float64 {
	lo, hi := 0, len(s)-1
	for lo < hi {
		p := s[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for s[i] < p {
				i++
			}
			for s[j] > p {
				j--
			}
			if i <= j {
				s[i], s[j] = s[j], s[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return s[k]
		}
	}
	return s[k]
}

// mad is the median absolute deviation of v about its median.
func mad(v []float64) float64 {
	m := median(v)
	dev := make([]float64, len(v))
	for i, x := range v {
		dev[i] = math.Abs(x - m)
	}
	return median(dev)
}

// theilSen is the median of the pairwise slopes (y[j]-y[i])/(x[j]-x[i])
// over i < j with x[j] > x[i], and the intercept median(y - slope*x).
func theilSen(x, y []float64) (slope, intercept float64) {
	n := len(y)
	if n < 2 {
		if n == 1 {
			return 0, y[0]
		}
		return 0, 0
	}
	slopes := make([]float64, 0, n*(n-1)/2)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if dx := x[j] - x[i]; dx > 0 {
				slopes = append(slopes, (y[j]-y[i])/dx)
			}
		}
	}
	slope = median(slopes)
	res := make([]float64, n)
	for i := range y {
		res[i] = y[i] - slope*x[i]
	}
	return slope, median(res)
}

// lagSlope is a cheap robust slope, O(n): the median of the slopes
// between each point and the one half the segment later. It stands in for
// Theil-Sen where a search evaluates many segments.
func lagSlope(x, y []float64) float64 {
	n := len(y)
	if n < 2 {
		return 0
	}
	h := (n + 1) / 2
	if h >= n {
		h = n - 1
	}
	s := make([]float64, 0, n-h)
	for i := 0; i+h < n; i++ {
		if dx := x[i+h] - x[i]; dx > 0 {
			s = append(s, (y[i+h]-y[i])/dx)
		}
	}
	return median(s)
}

// mannKendall returns the Mann-Kendall statistic S of y (in order) and
// its normal score Z = (S - sign(S)) / sqrt(Var S), with the variance
// corrected for ties. Values closer than tie are ties (0: exact).
func mannKendall(y []float64, tie float64) (s int, z float64) {
	n := len(y)
	if n < 3 {
		return 0, 0
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			switch d := y[j] - y[i]; {
			case d > tie:
				s++
			case d < -tie:
				s--
			}
		}
	}
	return s, mkZ(s, n, tieGroups(y, tie))
}

// tieGroups is the sizes of the groups of tied values (sorted values whose
// neighbours are within tie).
func tieGroups(y []float64, tie float64) []int {
	v := slices.Clone(y)
	slices.Sort(v)
	var groups []int
	run := 1
	for i := 1; i < len(v); i++ {
		if v[i]-v[i-1] <= tie {
			run++
			continue
		}
		if run > 1 {
			groups = append(groups, run)
		}
		run = 1
	}
	if run > 1 {
		groups = append(groups, run)
	}
	return groups
}

func mkZ(s, n int, ties []int) float64 {
	nf := float64(n)
	v := nf * (nf - 1) * (2*nf + 5)
	for _, t := range ties {
		tf := float64(t)
		v -= tf * (tf - 1) * (2*tf + 5)
	}
	v /= 18
	if v <= 0 {
		return 0
	}
	switch {
	case s > 0:
		return float64(s-1) / math.Sqrt(v)
	case s < 0:
		return float64(s+1) / math.Sqrt(v)
	}
	return 0
}

// pOneSided is the one-sided p-value of a normal score.
func pOneSided(z float64) float64 {
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// Trend is the robust trend of a series: the Theil-Sen slope per step
// and the Mann-Kendall score (tie-corrected) of the series in order.
type Trend struct {
	Slope float64
	Z     float64
}

// TrendOf is the trend of y over steps (increasing), the model's own
// test: other rules that ask "does this series grow" (reserved growing
// while allocated stays flat, a site growing between snapshots) read it
// rather than a test of their own. A series longer than MaxPoints is
// reduced to block medians first, as Analyze does.
func TrendOf(steps []int64, y []float64, p Params) Trend {
	if len(steps) != len(y) {
		panic("growth.TrendOf: steps and values differ in length")
	}
	steps, y = reduce(steps, y, p.MaxPoints)
	if len(y) < 2 {
		return Trend{}
	}
	x := make([]float64, len(y))
	for i, s := range steps {
		x[i] = float64(s - steps[0])
	}
	slope, _ := theilSen(x, y)
	_, z := mannKendall(y, 0)
	return Trend{Slope: slope, Z: z}
}

// Grows: the trend is significant growth (Z >= ZCrit, one-sided, and a
// positive slope).
func (t Trend) Grows(p Params) bool { return t.Z >= p.ZCrit && t.Slope > 0 }
