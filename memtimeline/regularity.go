package memtimeline

// IncreasingRises reports whether the amounts kept in successive steps
// grow: each larger than the one before and the last at least 1.5 times
// the first (k blocks at step k: an accelerating leak). It is the one
// test that the trace, snapshot and step-log leak rules share, so that
// every source calls the same series accelerating.
func IncreasingRises(v []int64) bool {
	if len(v) < 3 {
		return false
	}
	for i := 1; i < len(v); i++ {
		if v[i] <= v[i-1] {
			return false
		}
	}
	return 2*v[len(v)-1] >= 3*v[0]
}
