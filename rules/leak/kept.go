package leak

import (
	"fmt"

	"github.com/torchmem/torchmem/memtimeline"
)

// KeptByStep is what leak li of r kept from each ProfilerStep (by step
// number): the sum of its sites' bytes, the figure its bytes per step is
// made of. annotate's track and markers and the page's chart markers read
// it, so they say the same.
func (r Report) KeptByStep(li int) map[int64]int64 {
	byStep := map[int64]int64{}
	for _, s := range r.Leaks[li].Sites {
		for k, b := range s.BytesByStep {
			byStep[s.FirstStep+int64(k)] += b
		}
	}
	return byStep
}

// MarkerName labels leak li's marker at step n: what the step kept and
// what the leak kept so far (the page's chart, annotate's trace).
func MarkerName(li int, n, bytes, kept int64) string {
	return fmt.Sprintf("leak %d: ProfilerStep#%d kept %s (%s so far)", li+1, n, memtimeline.FormatBytes(bytes), memtimeline.FormatBytes(kept))
}
