package rules

import (
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

// One chart per GPU, with the trace's ProfilerStep bands.
func TestTraceCharts(t *testing.T) {
	cs := TraceCharts(memtest.SharedTrace(t, memtest.Testdata("traces", "resnet_train_clean", "trace.json.gz")))
	if len(cs) != 1 || len(cs[0].Steps) != 4 || cs[0].Allocated.Len() == 0 {
		t.Fatalf("%d charts", len(cs))
	}
}

// A trace that records no Total Reserved (torch 1.8) gets no reserved
// line: 0 B would read as a measurement.
func TestTraceChartsWithoutReserved(t *testing.T) {
	cs := TraceCharts(memtest.Trace(t, memtest.Testdata("public", "kineto_tb_plugin", "worker0.1623143089861.pt.trace.json.gz")))
	if len(cs) != 1 || cs[0].Reserved.Len() != 0 || cs[0].Allocated.Len() == 0 {
		t.Fatalf("%d charts; reserved %d points", len(cs), cs[0].Reserved.Len())
	}
}
