package memtest

import "math/rand/v2"

// NewRand is seeded: a failure must be reproducible.
func NewRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// RandomWalk is n points of a memory series: times that never go back
// (equal times allowed, as in real files) and values that walk by small
// steps, spikes up to 16 GiB and drops up to 8 GiB.
func RandomWalk(r *rand.Rand, n int) (times, values []int64) {
	times, values = make([]int64, n), make([]int64, n)
	var t, v int64
	for i := 0; i < n; i++ {
		t += r.Int64N(1000)
		switch r.IntN(4) {
		case 0: // a spike
			v += r.Int64N(1 << 34)
		case 1:
			v -= r.Int64N(1 << 33)
		default:
			v += r.Int64N(1<<20) - 1<<19
		}
		times[i], values[i] = t, v
	}
	return times, values
}
