package rules

import (
	"slices"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// Each step's peak is at most the trace's peak, the largest is the peak
// when it falls in a step, and a leak's steps climb.
func TestStepPeakAllocated(t *testing.T) {
	for _, tc := range []struct {
		path  string
		climb bool
	}{
		{"diff_pair/base", false},
		{"diff_pair/head_leak", true},
	} {
		tr := memtest.GPUTrace(t, tc.path)
		in := &Input{Source: tc.path, Rank: -1, Trace: tr}
		peaks := stepPeakAllocated(tr)
		if len(peaks) != len(tr.Steps) {
			t.Fatalf("%s: %d peaks for %d steps", tc.path, len(peaks), len(tr.Steps))
		}
		if got, want := slices.Max(peaks), in.Overview(-1).PeakAllocatedBytes; got != want {
			t.Errorf("%s: largest step peak %d, trace peak %d", tc.path, got, want)
		}
		if tc.climb && !slices.IsSorted(peaks) || tc.climb && peaks[0] == peaks[len(peaks)-1] {
			t.Errorf("%s: a leaking run's step peaks %v do not climb", tc.path, peaks)
		}
	}
}
