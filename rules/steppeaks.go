package rules

import (
	"cmp"
	"slices"

	"github.com/torchmem/torchmem/chrometrace"
	"github.com/torchmem/torchmem/memtimeline"
)

// stepPeakAllocated is, per ProfilerStep in time order, the most memory
// allocated on any GPU during the step (torch's total_allocated, counting
// what was alive when the step began). Empty without steps or memory
// events. diff draws it for both runs, step beside step.
func stepPeakAllocated(t *chrometrace.Trace) []int64 {
	if t == nil || len(t.Steps) == 0 {
		return nil
	}
	steps := slices.Clone(t.Steps)
	slices.SortFunc(steps, func(a, b chrometrace.Step) int { return cmp.Compare(a.Start, b.Start) })
	tls := memtimeline.TraceTimelines(t)
	if len(tls) == 0 {
		return nil
	}
	out := make([]int64, len(steps))
	for _, d := range tls {
		s := d.Allocated
		for i, st := range steps {
			// The level entering the step, then every sample inside it.
			k, _ := slices.BinarySearch(s.T, st.Start)
			peak := int64(0)
			if k > 0 {
				peak = s.V[k-1]
			}
			for ; k < len(s.T) && s.T[k] <= st.End(); k++ {
				peak = max(peak, s.V[k])
			}
			out[i] = max(out[i], peak)
		}
	}
	return out
}
