package memtimeline

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// The timeline's maximum is the trace's peak allocated, and the series is
// in time order (the file order is not).
func TestTraceTimelines(t *testing.T) {
	tr := memtest.NamedTrace(t, "resnet_train_clean")
	tls := TraceTimelines(tr)
	if len(tls) != 1 || tls[0].Label() != "cuda:0" {
		t.Fatalf("timelines %+v", len(tls))
	}
	peak, _ := PeakAllocated(tr, 0)
	if _, v, _ := tls[0].Allocated.Max(); v != peak {
		t.Errorf("max allocated %d, peak %d", v, peak)
	}
	for i := 1; i < tls[0].Allocated.Len(); i++ {
		if tls[0].Allocated.T[i] < tls[0].Allocated.T[i-1] {
			t.Fatal("not in time order")
		}
	}
}
