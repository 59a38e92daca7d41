package memtimeline

// Series is one quantity over time: memory in bytes at nanosecond times.
// V[i] holds from T[i] until T[i+1] (memory changes in steps).
type Series struct {
	Name string
	T    []int64 // ns, on the trace's clock
	V    []int64 // bytes
}

// Len is the number of points.
func (s Series) Len() int { return len(s.T) }

// Max returns the index and value of the largest V (first on ties); ok is
// false for an empty series.
func (s Series) Max() (i int, v int64, ok bool) {
	if len(s.V) == 0 {
		return 0, 0, false
	}
	for j, x := range s.V {
		if j == 0 || x > v {
			i, v = j, x
		}
	}
	return i, v, true
}

// Min returns the index and value of the smallest V (first on ties).
func (s Series) Min() (i int, v int64, ok bool) {
	if len(s.V) == 0 {
		return 0, 0, false
	}
	for j, x := range s.V {
		if j == 0 || x < v {
			i, v = j, x
		}
	}
	return i, v, true
}

// minDownsamplePoints is the fewest points that can carry first, last,
// minimum and maximum.
const minDownsamplePoints = 4

// Downsample returns at most max(maxPoints, 4) points of s chosen so that
// no peak is lost: the first and last points, and in each of equal-count
// buckets in between, the minimum and the maximum in time order. The max
// and min of the result therefore equal those of s exactly (LTTB and
// averaging both shave peaks, which is the one thing a memory chart must
// not do). A series that already fits is returned unchanged (sharing its
// slices).
func Downsample(s Series, maxPoints int) Series {
	idx := DownsampleIndices(s.V, maxPoints)
	if idx == nil {
		return s
	}
	return s.Pick(idx)
}

// Pick returns the points at the given indices (in the order given).
func (s Series) Pick(idx []int) Series {
	out := Series{Name: s.Name, T: make([]int64, len(idx)), V: make([]int64, len(idx))}
	for j, i := range idx {
		out.T[j], out.V[j] = s.T[i], s.V[i]
	}
	return out
}

// DownsampleIndices chooses the indices Downsample keeps, in increasing
// order, or nil when all len(v) points fit in maxPoints. Series that must
// stay aligned (stacked categories) are downsampled together by picking the
// same indices, chosen on their total.
func DownsampleIndices(v []int64, maxPoints int) []int {
	if maxPoints < minDownsamplePoints {
		maxPoints = minDownsamplePoints
	}
	n := len(v)
	if n <= maxPoints {
		return nil
	}
	// First and last are kept as they are; the n-2 inner points are split
	// into buckets of (almost) equal count, each contributing its min and
	// max (one point when they coincide).
	inner := n - 2
	buckets := (maxPoints - 2) / 2
	out := make([]int, 0, 2+2*buckets)
	out = append(out, 0)
	for b := 0; b < buckets; b++ {
		lo := 1 + b*inner/buckets
		hi := 1 + (b+1)*inner/buckets // exclusive
		if lo >= hi {
			continue
		}
		minI, maxI := lo, lo
		for i := lo + 1; i < hi; i++ {
			if v[i] < v[minI] {
				minI = i
			}
			if v[i] > v[maxI] {
				maxI = i
			}
		}
		switch {
		case minI == maxI:
			out = append(out, minI)
		case minI < maxI:
			out = append(out, minI, maxI)
		default:
			out = append(out, maxI, minI)
		}
	}
	out = append(out, n-1)
	return out
}
