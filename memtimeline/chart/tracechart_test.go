package chart

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// One chart per GPU, with the trace's ProfilerStep bands.
func TestTraceSpecs(t *testing.T) {
	tr := memtest.NamedTrace(t, "resnet_train_clean")
	specs := TraceSpecs(tr, "c")
	if len(specs) != 1 || len(specs[0].Steps) != 4 {
		t.Errorf("specs %d, steps %d", len(specs), len(specs[0].Steps))
	}
	if _, err := Snippet(specs[0]); err != nil {
		t.Error(err)
	}
}
