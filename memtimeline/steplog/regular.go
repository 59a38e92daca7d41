package steplog

import (
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/memtimeline"
)

// The step-log regularity rule (the same rule the trace and snapshot leak
// analyses apply per site, here applied to the allocated total; the
// snippet's LeakWatch follows it too):
//
//  1. Take allocated bytes after each step, leaving out the warm-up
//     records (step 0 creates optimizer state and gradients), and the
//     change from each record to the next: a rise when it is above 0.
//  2. Memory grows when the log ENDS in a regular pattern of rises:
//     - consecutive: each of the last k >= 3 records rose (period 1), or
//     - periodic: rises exactly every P >= 2 steps, k >= 2 of them, the
//     records between them flat, and the log ends before the next rise is
//     due (a periodic evaluation that appends its outputs);
//     the rises steady (the largest at most twice the smallest) or each
//     larger than the one before (hooks piling up); with k = 2 the two
//     must match within 10% (two rises of different size are any two
//     rises, as a cache filling at random makes them). "Flat" is a change of
//     at most an eighth of the smallest rise, either way.
//  3. Size decides nothing: 256 KiB a step is growth like 5 GiB a step.
//     A one-time jump (one rise, or two in a row) is never growth.
//  4. A pattern that stopped is not growth: rises followed by at least
//     max(3, 2P) flat records are a cache or queue that filled up (Bounded).
//  5. A log that fell, anywhere before the pattern, by at least half its
//     smallest rise is noise, not a pattern (variable-size batches).
//
// The figure is the median rise divided by the period, in bytes per step;
// the first and last rise give the steps. No least-squares fit decides the
// verdict; the fitted line (Trend, R²) is kept only for the table.

// Growth is a regular pattern of rises found in a series.
type Growth struct {
	// Period is the steps between rises (1: every step).
	Period int64 `json:"period_steps"`
	// Rises is how many rises the pattern holds; RiseBytes their median.
	Rises     int   `json:"rises"`
	RiseBytes int64 `json:"rise_bytes"`
	// BytesPerStep is RiseBytes / Period.
	BytesPerStep int64 `json:"bytes_per_step"`
	// FirstStep and LastStep are the steps of the first and last rise.
	FirstStep int64 `json:"first_step"`
	LastStep  int64 `json:"last_step"`
	// Accelerating: each rise larger than the one before.
	Accelerating bool `json:"accelerating,omitempty"`
	// Bounded: the pattern stopped, and FlatAfter records stayed flat
	// after its last rise (a cache or queue that filled up).
	Bounded   bool `json:"bounded,omitempty"`
	FlatAfter int  `json:"flat_after,omitempty"`
}

// MinConsecutiveRises is how many consecutive rises make growth; a
// periodic pattern needs MinPeriodicRises rises.
const (
	MinConsecutiveRises = 3
	MinPeriodicRises    = 2
)

// Regularity finds the regular growth at the end of vals (allocated bytes
// after each step, -1 for missing values are left out by the caller) with
// their step numbers. It returns the growth reaching the end of the log,
// else a bounded one (the longest pattern that stopped, Bounded set), else
// nil; noisy reports a series that falls as much as it rises.
func Regularity(steps, vals []int64) (g *Growth, noisy bool) {
	n := len(vals)
	if n < 3 {
		return nil, false
	}
	d := make([]int64, n) // d[i]: change from record i-1 to i; d[0] unused
	for i := 1; i < n; i++ {
		d[i] = vals[i] - vals[i-1]
	}
	// The growth reaching the end: the last rise, then a period that fits.
	last := n - 1
	for last > 0 && d[last] <= 0 {
		last--
	}
	if last > 0 {
		// The period is 1, or the distance back to the previous record
		// that changed: the records between rises are flat.
		periods := []int{1}
		for j := last - 1; j >= 1; j-- {
			if 16*abs(d[j]) > d[last] {
				periods = append(periods, last-j)
				break
			}
		}
		tail := n - 1 - last
		for _, p := range periods {
			if p <= tail || (p > 1 && p == periods[0]) {
				continue
			}
			if pg := pattern(steps, d, last, p); pg != nil && flatBetween(d, last, n, pg.RiseBytes/2) {
				if fellBefore(d, pg, steps) {
					return nil, true
				}
				return pg, false
			}
		}
	}
	// A pattern that stopped: consecutive rises (steady or not: a cache
	// filling with entries of different sizes), then flat to the end.
	if last < 1 {
		return nil, false
	}
	lo := last
	for lo > 1 && d[lo-1] > 0 {
		lo--
	}
	rises := slices.Clone(d[lo : last+1])
	if len(rises) < MinConsecutiveRises {
		return nil, false
	}
	med := slices.Sorted(slices.Values(rises))[len(rises)/2]
	flat := 0
	for j := last + 1; j < n && abs(d[j]) <= med/8; j++ {
		flat++
	}
	if flat < MinConsecutiveRises || last+flat != n-1 {
		return nil, false
	}
	return &Growth{Period: 1, Rises: len(rises), RiseBytes: med, BytesPerStep: med, FirstStep: steps[lo], LastStep: steps[last],
		Bounded: true, FlatAfter: flat}, false
}

// pattern tests rises at last, last-p, last-2p, ... with flat records
// between, and returns the longest such pattern that qualifies.
func pattern(steps, d []int64, last, p int) *Growth {
	var rises []int64
	var at []int
	for i := last; i >= 1; i -= p {
		if d[i] <= 0 {
			break
		}
		cand := append(slices.Clone(rises), d[i])
		if !steadyOrIncreasing(cand) {
			break
		}
		// The records between this rise and the next one are flat.
		if len(at) > 0 && !flatBetween(d, i, at[len(at)-1], slices.Min(cand)) {
			break
		}
		rises, at = cand, append(at, i)
	}
	need := MinConsecutiveRises
	if p > 1 {
		need = MinPeriodicRises
	}
	if len(rises) < need {
		return nil
	}
	// Two rises a period apart are a period only when they match: any two
	// rises of a cache filling at random (new keys, new shapes) are some
	// steps apart. Rises that grow, or differ, need a third (LeakWatch's
	// rule in the snippet: two jumps within 10%, growing jumps 2p+1 steps).
	if p > 1 && len(rises) == 2 && 10*slices.Max(rises) > 11*slices.Min(rises) {
		return nil
	}
	slices.Reverse(rises)
	slices.Reverse(at)
	med := slices.Sorted(slices.Values(rises))[len(rises)/2]
	period := int64(p)
	if len(at) > 1 {
		// In steps, not records: a log written every N steps.
		period = (steps[at[len(at)-1]] - steps[at[0]]) / int64(len(at)-1)
	} else if at[0] > 0 {
		period = steps[at[0]] - steps[at[0]-1]
	}
	period = max(period, 1)
	g := &Growth{Period: period, Rises: len(rises), RiseBytes: med, BytesPerStep: med / period,
		FirstStep: steps[at[0]], LastStep: steps[at[len(at)-1]], Accelerating: memtimeline.IncreasingRises(rises)}
	if g.Accelerating {
		var sum int64
		for _, r := range rises {
			sum += r
		}
		g.RiseBytes = sum / int64(len(rises))
		g.BytesPerStep = g.RiseBytes / period
	}
	return g
}

func flatBetween(d []int64, lo, hi int, minRise int64) bool {
	for j := lo + 1; j < hi; j++ {
		if abs(d[j]) > minRise/8 {
			return false
		}
	}
	return true
}

// fellBefore: the series fell, before the pattern's first rise, by half
// its smallest rise or more: rises and falls alike, noise.
func fellBefore(d []int64, g *Growth, steps []int64) bool {
	for i := 1; i < len(d) && steps[i] < g.FirstStep; i++ {
		if d[i] < 0 && -2*d[i] >= g.RiseBytes {
			return true
		}
	}
	return false
}

func steadyOrIncreasing(v []int64) bool {
	if len(v) < 2 {
		return true
	}
	return slices.Max(v) <= 2*slices.Min(v) || memtimeline.IncreasingRises(v) || decreasingRises(v)
}

func decreasingRises(v []int64) bool {
	r := slices.Clone(v)
	slices.Reverse(r)
	return memtimeline.IncreasingRises(r)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Describe says the growth in a sentence: "+8.00 MB every 5th step (steps
// 4, 9, ..., 29)", "+4.00 MB every step over steps 6..11".
func (g *Growth) Describe() string {
	if g == nil {
		return ""
	}
	var s string
	if g.Period == 1 {
		s = fmt.Sprintf("allocated grows %s every step over steps %d..%d", memtimeline.FormatBytes(g.RiseBytes), g.FirstStep, g.LastStep)
	} else {
		s = fmt.Sprintf("allocated grows %s every %d steps (%d rises, steps %d..%d; flat between): %s per step", memtimeline.FormatBytes(g.RiseBytes), g.Period, g.Rises, g.FirstStep, g.LastStep, memtimeline.FormatBytes(g.BytesPerStep))
	}
	if g.Accelerating {
		s += ", more each time (accelerating)"
	}
	if g.Bounded {
		s += fmt.Sprintf(", then stays flat for %d steps to the end of the log: bounded (a cache or queue that filled up), not a leak", g.FlatAfter)
	}
	return s
}
