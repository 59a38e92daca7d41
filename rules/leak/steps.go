package leak

import (
	"slices"

	"github.com/torchmem/torchmem/memtimeline"
)

// siteSeries is what one site kept from each step, and why.
type siteSeries struct {
	site   memtimeline.Site
	bytes  []int64 // per step: survivors' bytes
	blocks []int64
	first  int32   // Memory index of the first surviving allocation
	allocs []int32 // Memory indices of the surviving allocations
	// maxRetention is the most step boundaries a freed block of this site
	// lived across: a rolling buffer of K steps frees blocks K steps later.
	maxRetention int
	// Autograd evidence, in blocks: made by an op that recorded a graph
	// node; of those, whose node's backward ran; made in backward.
	graphBlocks, backwardRanBlocks, backwardMadeBlocks, noGraphBlocks int64
}

// run is a leak candidate: steps lo..hi (indices) of one site.
type run struct {
	lo, hi       int
	bytesPerStep int64
	accelerating bool
	accel        int64
	// period > 1: the site keeps memory every period-th step only (lo, lo
	// + period, ..., hi), nothing between; bytesPerStep is each step's
	// share (rise / period) and rise the bytes kept each time.
	period int
	rise   int64
}

// regularRun finds the longest stretch of at least minSteps consecutive
// steps in which the site kept memory, and judges whether it is regular:
// steady bytes (or blocks) per step, or a steady increase (accelerating).
// The window's last step is left out of the judgement when the stretch
// reaches it: that step also holds its own outputs and gradients.
func regularRun(bytes, blocks []int64, minSteps int) (run, bool) {
	best := run{lo: -1}
	for i := 0; i < len(bytes); {
		if bytes[i] == 0 {
			i++
			continue
		}
		j := i
		for j+1 < len(bytes) && bytes[j+1] > 0 {
			j++
		}
		if j-i > best.hi-best.lo || best.lo < 0 {
			best = run{lo: i, hi: j}
		}
		i = j + 1
	}
	if best.lo < 0 || best.hi-best.lo+1 < minSteps {
		if p, ok := periodicRun(bytes, blocks); ok {
			return p, true
		}
		return best, false
	}
	// A site that stopped keeping memory, minSteps steps or more before
	// the end (the last step aside), filled up: a cache of one entry per
	// shape, a queue that reached its bound. Not growth (the step-log
	// rule's "bounded").
	if len(bytes)-2-best.hi >= minSteps {
		return best, false
	}
	hi := best.hi
	if hi == len(bytes)-1 && hi-best.lo+1 > minSteps {
		hi-- // judge without the final step
	}
	vb, vn := bytes[best.lo:hi+1], blocks[best.lo:hi+1]
	steady := func(v []int64) bool { return slices.Max(v) <= 2*slices.Min(v) }
	// Bytes per step: the mean of the steps near the median, so that a
	// first step that also made one-time buffers at the same line does
	// not count as growth.
	med := slices.Sorted(slices.Values(vb))[len(vb)/2]
	var sum, n int64
	for _, b := range vb {
		if 10*b >= 9*med && 10*b <= 11*med {
			sum += b
			n++
		}
	}
	best.bytesPerStep = sum / max(n, 1)
	if memtimeline.IncreasingRises(vb) || memtimeline.IncreasingRises(vn) {
		// Measured over every step of the stretch: the last one keeps
		// the most, not extra outputs.
		all := bytes[best.lo : best.hi+1]
		sum = 0
		for _, b := range all {
			sum += b
		}
		best.bytesPerStep = sum / int64(len(all))
		best.accelerating = true
		best.accel = (all[len(all)-1] - all[0]) / int64(len(all)-1)
		return best, true
	}
	if steady(vb) || steady(vn) {
		return best, true
	}
	// A site's one-time holdings in the run's first step (buffers made
	// once at the same line) must not hide its steady later steps: judge
	// the run without its first step when enough steps remain.
	if hi-best.lo >= minSteps {
		if r, ok := regularRun(append(make([]int64, best.lo+1), bytes[best.lo+1:]...), append(make([]int64, best.lo+1), blocks[best.lo+1:]...), minSteps); ok && r.lo == best.lo+1 {
			return r, true
		}
	}
	return best, false
}

// MinPeriodicSteps is how many steps a periodic site must keep memory in:
// two jumps the same distance apart, nothing kept between (the step-log
// rule the old steplog Regularity followed, read per site; step logs now
// use memtimeline/growth).
const MinPeriodicSteps = 2

// periodicRun finds a site that keeps memory every P >= 2 steps and
// nothing between: the last steps that kept memory, P apart, the same
// amount within a factor of 2, at least MinPeriodicSteps of them, and the
// window ends before the next one is due (a missed jump is no period).
func periodicRun(bytes, blocks []int64) (run, bool) {
	// The window's last step is left out: it also holds its own outputs
	// and gradients, whatever the site does in other steps.
	bytes = bytes[:max(len(bytes)-1, 0)]
	var at []int
	for i, b := range bytes {
		if b > 0 {
			at = append(at, i)
		}
	}
	if len(at) < MinPeriodicSteps {
		return run{}, false
	}
	last := at[len(at)-1]
	p := last - at[len(at)-2]
	if p < 2 || len(bytes)-1-last >= p {
		return run{}, false
	}
	k := len(at) - 1
	for k > 0 && at[k]-at[k-1] == p {
		k--
	}
	jumps := at[k:]
	if len(jumps) < MinPeriodicSteps {
		return run{}, false
	}
	v := make([]int64, len(jumps))
	for i, j := range jumps {
		v[i] = bytes[j]
	}
	if slices.Max(v) > 2*slices.Min(v) {
		return run{}, false
	}
	med := slices.Sorted(slices.Values(v))[len(v)/2]
	return run{lo: jumps[0], hi: last, bytesPerStep: med / int64(p), period: p, rise: med}, true
}
