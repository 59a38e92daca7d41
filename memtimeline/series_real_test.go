package memtimeline_test

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline"
	"github.com/torchmem/torchmem/memtimeline/exported"
	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func TestDownsampleRealTimeline(t *testing.T) {
	tl, err := exported.ReadFile(memtest.Testdata("timeline", "big_transformer", "memory_timeline.raw.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	total := tl.Total("allocated")
	for _, maxPoints := range []int{4, 100, 1000, 5000} {
		out := memtimeline.Downsample(total, maxPoints)
		memtimeline.CheckDownsampled(t, total, out, maxPoints)
	}
	// Categories downsampled together stay aligned and their stack keeps
	// the total's peak.
	idx := memtimeline.DownsampleIndices(total.V, 1000)
	_, wantPeak, _ := total.Max()
	var gotPeak int64
	for _, i := range idx {
		gotPeak = max(gotPeak, tl.TotalAt(i))
	}
	if gotPeak != wantPeak {
		t.Fatalf("stacked categories at chosen indices peak at %d, total peaks at %d", gotPeak, wantPeak)
	}
}
