package memtimeline

import "testing"

func TestIncreasingRises(t *testing.T) {
	for _, c := range []struct {
		v    []int64
		want bool
	}{
		{[]int64{1, 2, 3}, true},     // k blocks at step k
		{[]int64{4, 5, 6}, true},     // last 1.5x the first
		{[]int64{4, 5, 5}, false},    // a flat step
		{[]int64{10, 11, 12}, false}, // growing, but under 1.5x: steady
		{[]int64{3, 2, 1}, false},    // falling
		{[]int64{1, 2}, false},       // two rises tell no trend
		{[]int64{1 << 20, 2 << 20, 3 << 20}, true},
	} {
		if got := IncreasingRises(c.v); got != c.want {
			t.Errorf("IncreasingRises(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}
